//! `aqmlab._sim`: the thin PyO3 layer between the Rust engine and the `aqmlab` package.
//!
//! Only plain Python values cross the boundary (a JSON string, lists of floats, tuples of
//! strings), so the Python side owns every DataFrame and file format decision.

use pyo3::create_exception;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

create_exception!(
    aqmlab._sim,
    ScenarioError,
    PyValueError,
    "A scenario that cannot be run; the message is one line naming the key and line."
);

create_exception!(
    aqmlab._sim,
    RunCancelled,
    PyRuntimeError,
    "The run was cancelled through its RunControl before it finished."
);

/// A handle shared with a running `run(..., control=...)`: another thread reads `progress`
/// (the fraction of simulated time done, updated once per sampling step) and calls
/// `cancel()` to stop the run at the next step.
#[pyclass(frozen)]
#[derive(Default)]
struct RunControl {
    cancelled: Arc<AtomicBool>,
    /// f64 bits of the fraction done.
    progress: Arc<AtomicU64>,
}

#[pymethods]
impl RunControl {
    #[new]
    fn new() -> Self {
        RunControl::default()
    }
    /// Asks the run to stop at its next sampling step (it then raises `RunCancelled`).
    fn cancel(&self) {
        self.cancelled.store(true, Ordering::Relaxed);
    }
    #[getter]
    fn cancelled(&self) -> bool {
        self.cancelled.load(Ordering::Relaxed)
    }
    /// Fraction of the simulated duration done, 0.0 to 1.0.
    #[getter]
    fn progress(&self) -> f64 {
        f64::from_bits(self.progress.load(Ordering::Relaxed))
    }
}

/// One series: (entity, metric, unit, values).
type ColumnTuple = (String, String, String, Vec<f64>);

/// run(toml_text, seed=None, overrides=[], pcap=None, pcap_flows=[], pcap_snaplen=128,
///     progress=None, control=None) -> (summary_json, time, columns)
///
/// Parses the scenario TOML (after applying `key=value` overrides), runs it with the GIL
/// released and returns the summary as a JSON string (keys in engine order), the shared
/// time grid in seconds and the columns as `(entity, metric, unit, values)` tuples.
/// `pcap=(cli_path, srv_path)` writes the client-side and server-side packet captures
/// (only the endpoints named in `pcap_flows`, if any; frames cut at `pcap_snaplen` bytes).
/// Raises `ScenarioError` (a `ValueError`) for bad input.
///
/// Once per sampling step of simulated time (not per packet) the run takes the GIL to check
/// for signals (so Ctrl-C raises `KeyboardInterrupt` while it runs, from the main thread) and
/// calls `progress(fraction_done)` if given (an exception from it stops the run and
/// propagates); the last call reports 1.0. `control` (a `RunControl`) gets the fraction done
/// and can cancel the run from another thread: the run then raises `RunCancelled`.
#[pyfunction]
#[pyo3(signature = (toml_text, seed=None, overrides=Vec::new(), pcap=None, pcap_flows=Vec::new(), pcap_snaplen=aqmlab_sim::capture::DEFAULT_SNAPLEN, progress=None, control=None))]
fn run(
    py: Python<'_>,
    toml_text: String,
    seed: Option<u64>,
    overrides: Vec<String>,
    pcap: Option<(String, String)>,
    pcap_flows: Vec<String>,
    pcap_snaplen: u32,
    progress: Option<PyObject>,
    control: Option<Py<RunControl>>,
) -> PyResult<(String, Vec<f64>, Vec<ColumnTuple>)> {
    let capture = pcap.map(|(cli, srv)| aqmlab_sim::capture::CaptureSpec { cli: cli.into(), srv: srv.into(), flows: pcap_flows, snaplen: pcap_snaplen });
    let (cancelled, done) = match &control {
        Some(c) => (c.get().cancelled.clone(), c.get().progress.clone()),
        None => Default::default(),
    };
    let mut py_err: Option<PyErr> = None;
    let result = py.allow_threads(|| {
        let tick = |f: f64| {
            done.store(f.to_bits(), Ordering::Relaxed);
            if cancelled.load(Ordering::Relaxed) {
                return false;
            }
            let r = Python::with_gil(|py| {
                py.check_signals()?;
                if let Some(cb) = &progress {
                    cb.call1(py, (f,))?;
                }
                Ok::<(), PyErr>(())
            });
            match r {
                Ok(()) => true,
                Err(e) => {
                    py_err = Some(e);
                    false
                }
            }
        };
        aqmlab_sim::run_toml_with(&toml_text, seed, &overrides, capture.as_ref(), tick).map(|out| {
            out.map(|out| {
                let summary = serde_json::to_string(&out.summary);
                let columns: Vec<ColumnTuple> = out
                    .series
                    .columns
                    .into_iter()
                    .map(|c| (c.entity, c.metric, c.unit.to_string(), c.values))
                    .collect();
                (summary, out.series.time, columns)
            })
        })
    });
    if let Some(e) = py_err {
        return Err(e);
    }
    match result {
        Ok(Some((Ok(summary), time, columns))) => Ok((summary, time, columns)),
        Ok(Some((Err(e), _, _))) => Err(PyRuntimeError::new_err(format!("cannot serialise summary: {e}"))),
        Ok(None) => Err(RunCancelled::new_err("run cancelled")),
        Err(e) => Err(ScenarioError::new_err(e.to_string())),
    }
}

/// scenario_schema() -> str
///
/// The JSON Schema (draft-07) of the scenario format, generated from the engine's scenario
/// structs: keys, types, enums, unit-carrying strings and the qdisc/cc kinds.
#[pyfunction]
fn scenario_schema() -> String {
    aqmlab_sim::schema::scenario_schema_text()
}

/// resolve(toml_text, seed=None, overrides=[]) -> str
///
/// The scenario that would run, as TOML: the text with the `key=value` overrides and the seed
/// written in, after validation (raises `ScenarioError` as `run` does). Runs nothing.
#[pyfunction]
#[pyo3(signature = (toml_text, seed=None, overrides=Vec::new()))]
fn resolve(toml_text: String, seed: Option<u64>, overrides: Vec<String>) -> PyResult<String> {
    aqmlab_sim::resolve_toml(&toml_text, seed, &overrides).map_err(|e| ScenarioError::new_err(e.to_string()))
}

/// qdisc_table() -> str
///
/// Every queue discipline's parameter table as a JSON array: per kind its `name`,
/// `aliases`, `doc` and `params` (each with `name`, `type`, `default`, `default_text`,
/// `stack_defaults`, `unit`, `doc`, `aliases`, `words`).
#[pyfunction]
fn qdisc_table() -> String {
    aqmlab_sim::qdisc::table_json().to_string()
}

/// cc_table() -> str
///
/// Every congestion control's parameter table as JSON, in the form of `qdisc_table`.
#[pyfunction]
fn cc_table() -> String {
    aqmlab_sim::cc::table_json().to_string()
}

#[pymodule]
fn _sim(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_function(wrap_pyfunction!(resolve, m)?)?;
    m.add_function(wrap_pyfunction!(qdisc_table, m)?)?;
    m.add_function(wrap_pyfunction!(cc_table, m)?)?;
    m.add_function(wrap_pyfunction!(scenario_schema, m)?)?;
    m.add_class::<RunControl>()?;
    m.add("RunCancelled", m.py().get_type::<RunCancelled>())?;
    m.add("ScenarioError", m.py().get_type::<ScenarioError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
