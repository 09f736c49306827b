//! `aqmlab._sim`: the thin PyO3 layer between the Rust engine and the `aqmlab` package.
//!
//! Only plain Python values cross the boundary (a JSON string, lists of floats, tuples of
//! strings), so the Python side owns every DataFrame and file format decision.

use pyo3::create_exception;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;

create_exception!(
    aqmlab._sim,
    ScenarioError,
    PyValueError,
    "A scenario that cannot be run; the message is one line naming the key and line."
);

/// One series: (entity, metric, unit, values).
type ColumnTuple = (String, String, String, Vec<f64>);

/// run(toml_text, seed=None, overrides=[], pcap=None, pcap_flows=[], pcap_snaplen=128)
///     -> (summary_json, time, columns)
///
/// Parses the scenario TOML (after applying `key=value` overrides), runs it with the GIL
/// released and returns the summary as a JSON string (keys in engine order), the shared
/// time grid in seconds and the columns as `(entity, metric, unit, values)` tuples.
/// `pcap=(cli_path, srv_path)` writes the client-side and server-side packet captures
/// (only the endpoints named in `pcap_flows`, if any; frames cut at `pcap_snaplen` bytes).
/// Raises `ScenarioError` (a `ValueError`) for bad input.
#[pyfunction]
#[pyo3(signature = (toml_text, seed=None, overrides=Vec::new(), pcap=None, pcap_flows=Vec::new(), pcap_snaplen=aqmlab_sim::capture::DEFAULT_SNAPLEN))]
fn run(
    py: Python<'_>,
    toml_text: String,
    seed: Option<u64>,
    overrides: Vec<String>,
    pcap: Option<(String, String)>,
    pcap_flows: Vec<String>,
    pcap_snaplen: u32,
) -> PyResult<(String, Vec<f64>, Vec<ColumnTuple>)> {
    let capture = pcap.map(|(cli, srv)| aqmlab_sim::capture::CaptureSpec { cli: cli.into(), srv: srv.into(), flows: pcap_flows, snaplen: pcap_snaplen });
    let result = py.allow_threads(move || {
        aqmlab_sim::run_toml_capture(&toml_text, seed, &overrides, capture.as_ref()).map(|out| {
            let summary = serde_json::to_string(&out.summary);
            let columns: Vec<ColumnTuple> = out
                .series
                .columns
                .into_iter()
                .map(|c| (c.entity, c.metric, c.unit.to_string(), c.values))
                .collect();
            (summary, out.series.time, columns)
        })
    });
    match result {
        Ok((Ok(summary), time, columns)) => Ok((summary, time, columns)),
        Ok((Err(e), _, _)) => Err(PyRuntimeError::new_err(format!("cannot serialise summary: {e}"))),
        Err(e) => Err(ScenarioError::new_err(e.to_string())),
    }
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
    m.add("ScenarioError", m.py().get_type::<ScenarioError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
