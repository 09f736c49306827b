//! `aqmlab._sim`: the thin PyO3 layer between the Rust engine and the `aqmlab` package.
//!
//! Only plain Python values cross the boundary (a JSON string, tuples of strings, the series
//! as f64 bytes for `numpy.frombuffer`), so the Python side owns every DataFrame and file
//! format decision.

use pyo3::create_exception;
use pyo3::exceptions::{PyOSError, PyRuntimeError, PyValueError};
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyList, PyString};
use pyo3::prelude::*;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

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

/// A run's series as they cross to Python: the `(entity, metric, unit)` of each column in
/// engine order, the time grid and the values as native-endian f64 bytes (for
/// `numpy.frombuffer`; values column after column, `values[c * len(time) + i]`), the run's
/// tick the grid starts at, and the chunks streamed to the spill file before it.
type SeriesOut<'py> = (Vec<(String, String, &'static str)>, Bound<'py, PyBytes>, Bound<'py, PyBytes>, usize, Vec<SpillEntry>);

/// One chunk in the spill file: (byte offset, first tick, ticks, columns); at the offset the
/// chunk's time grid (ticks f64) and then its values, column after column (ticks x columns f64).
type SpillEntry = (u64, usize, usize, usize);

fn f64_bytes(v: &[f64]) -> &[u8] {
    // SAFETY: any f64 is 8 initialised bytes, u8 has alignment 1, and the length is the
    // slice's size in bytes.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
}

/// Where the series chunks of a streaming run go: appended to a file, their places indexed.
struct Spill {
    file: std::io::BufWriter<std::fs::File>,
    offset: u64,
    index: Vec<SpillEntry>,
    error: Option<std::io::Error>,
}

impl Spill {
    fn write(&mut self, chunk: &aqmlab_sim::metrics::SeriesChunk) {
        use std::io::Write;
        if self.error.is_some() {
            return;
        }
        let r = self.file.write_all(f64_bytes(&chunk.time)).and_then(|()| self.file.write_all(f64_bytes(&chunk.values)));
        match r {
            Ok(()) => {
                self.index.push((self.offset, chunk.first_tick, chunk.time.len(), chunk.columns));
                self.offset += 8 * (chunk.time.len() + chunk.values.len()) as u64;
            }
            Err(e) => self.error = Some(e),
        }
    }
}

/// run(toml_text, seed=None, overrides=[], pcap=None, pcap_flows=[], pcap_snaplen=128,
///     progress=None, control=None, series_fd=None, chunk_values=4194304)
///     -> (summary_json, keys, time, values, first_tick, spill)
///
/// Parses the scenario TOML (after applying `key=value` overrides), runs it with the GIL
/// released and returns the summary as a JSON string (keys in engine order) and the series:
/// `keys`, the `(entity, metric, unit)` of each column in engine order; `time`, the time grid
/// in seconds, and `values`, the columns one after the other on it, both as native-endian f64
/// bytes (`numpy.frombuffer`); `first_tick`, the run's tick `time` starts at; `spill`, the
/// chunks written before it.
///
/// With `series_fd` (an open, writable file descriptor, e.g. of an unlinked temporary file)
/// the series are streamed: whenever about `chunk_values` values (ticks x columns) are held,
/// they are appended to that file as one chunk and forgotten, so the run's memory does not
/// grow with its simulated duration. `spill` lists the chunks as `(byte offset, first tick,
/// ticks, columns)`: at the offset the chunk's time grid, then its columns one after the other
/// (a column registered later, by a qdisc swap, is NaN over earlier chunks). The ticks after
/// the last chunk are `time`/`values`; a run shorter than one chunk writes nothing.
///
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
#[pyo3(signature = (toml_text, seed=None, overrides=Vec::new(), pcap=None, pcap_flows=Vec::new(), pcap_snaplen=aqmlab_sim::capture::DEFAULT_SNAPLEN, progress=None, control=None, series_fd=None, chunk_values=4 << 20))]
#[allow(clippy::too_many_arguments)]
fn run<'py>(
    py: Python<'py>,
    toml_text: String,
    seed: Option<u64>,
    overrides: Vec<String>,
    pcap: Option<(String, String)>,
    pcap_flows: Vec<String>,
    pcap_snaplen: u32,
    progress: Option<PyObject>,
    control: Option<Py<RunControl>>,
    series_fd: Option<i32>,
    chunk_values: usize,
) -> PyResult<(String, SeriesOut<'py>)> {
    let capture = pcap.map(|(cli, srv)| aqmlab_sim::capture::CaptureSpec { cli: cli.into(), srv: srv.into(), flows: pcap_flows, snaplen: pcap_snaplen });
    let break_invariant = broken_invariant_for_tests()?;
    let (cancelled, done) = match &control {
        Some(c) => (c.get().cancelled.clone(), c.get().progress.clone()),
        None => Default::default(),
    };
    let spill = match series_fd {
        Some(fd) if fd >= 0 => {
            // SAFETY: the fd is only borrowed for the duration of this call to be duplicated;
            // the caller keeps its own descriptor open.
            let owned = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) }.try_clone_to_owned()?;
            let file = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::from(owned));
            Some(Arc::new(Mutex::new(Spill { file, offset: 0, index: Vec::new(), error: None })))
        }
        Some(fd) => return Err(PyValueError::new_err(format!("series_fd {fd}: not a file descriptor"))),
        None => None,
    };
    let stream = spill.clone().map(|s| {
        let sink: aqmlab_sim::metrics::ChunkSink = Box::new(move |chunk| s.lock().expect("spill lock").write(&chunk));
        (sink, chunk_values)
    });
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
        aqmlab_sim::run_toml_streaming(&toml_text, seed, &overrides, capture.as_ref(), stream, break_invariant, tick)
    });
    if let Some(e) = py_err {
        return Err(e);
    }
    let out = match result {
        Ok(Some(out)) => out,
        Ok(None) => return Err(RunCancelled::new_err("run cancelled")),
        Err(e) => return Err(ScenarioError::new_err(e.to_string())),
    };
    let index = match spill {
        Some(s) => {
            let mut s = s.lock().expect("spill lock");
            if s.error.is_none() {
                if let Err(e) = std::io::Write::flush(&mut s.file) {
                    s.error = Some(e);
                }
            }
            if let Some(e) = s.error.take() {
                return Err(PyOSError::new_err(format!("writing the series to the spill file failed: {e}")));
            }
            std::mem::take(&mut s.index)
        }
        None => Vec::new(),
    };
    let summary = serde_json::to_string(&out.summary).map_err(|e| PyRuntimeError::new_err(format!("cannot serialise summary: {e}")))?;
    let mut series = out.series;
    let ticks = series.time.len();
    let time = PyBytes::new(py, f64_bytes(&series.time));
    let values = PyBytes::new_with(py, 8 * ticks * series.columns.len(), |buf| {
        for (c, chunk) in series.columns.iter_mut().zip(buf.chunks_exact_mut((8 * ticks).max(1))) {
            chunk.copy_from_slice(f64_bytes(&c.values));
            c.values = Vec::new(); // freed as copied: the run's peak holds the series once
        }
        Ok(())
    })?;
    let keys = series.columns.into_iter().map(|c| (c.entity, c.metric, c.unit)).collect();
    Ok((summary, (keys, time, values, series.first_tick, index)))
}

/// The environment variable that makes a run report an invariant as violated although it
/// holds, for the tests of how a violation reaches the user (`tests/python/test_invariants_cli.py`:
/// the CLI runs in a process of its own, so the test reaches it through its environment). Its
/// value names the invariant (`flow conservation`: `aqmlab_sim::sim::BrokenInvariant`). Read
/// here, once per `run` call, and handed to the engine as an explicit option; unset or empty
/// in every normal run.
const BREAK_INVARIANT_ENV: &str = "AQMLAB_TEST_BREAK_INVARIANT";

/// [`BREAK_INVARIANT_ENV`]'s invariant; an unknown name is a `ValueError`.
fn broken_invariant_for_tests() -> PyResult<Option<aqmlab_sim::sim::BrokenInvariant>> {
    match std::env::var(BREAK_INVARIANT_ENV) {
        Ok(name) if !name.is_empty() => aqmlab_sim::sim::BrokenInvariant::from_name(&name)
            .map(Some)
            .ok_or_else(|| PyValueError::new_err(format!("{BREAK_INVARIANT_ENV}={name:?}: expected \"flow conservation\""))),
        _ => Ok(None),
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

/// Appends Python's `repr(x)` of a float to `out` (CPython's `float_repr`, mode 'r' of
/// `PyOS_double_to_string` in Python/pystrtod.c with `Py_DTSF_ADD_DOT_0`, 3.11): the shortest
/// digits that read back as `x`, laid out positionally when the decimal exponent `e`
/// (x = d.ddd * 10^e) is in -4..=15 (`1e-05` but `0.0001`; `1000000000000000.0` but `1e+16`),
/// with `.0` added to an integral positional value, and otherwise as `d.ddde±XX` (at least two
/// exponent digits); `inf`, `-inf`, `nan`, `-0.0`. The digits are the shortest round-trip
/// ones from the `zmij` crate (Schubfach), which, like David Gay's dtoa mode 0 that CPython
/// uses, pick the one nearest `x` among the shortest, ties to even made sure by
/// `even_tie_digits` (tests/python/test_csv_format.py compares with `repr` on edge values
/// and on random bit patterns).
fn push_py_float_repr(out: &mut Vec<u8>, x: f64) {
    use std::io::Write;
    if x.is_nan() {
        out.extend_from_slice(b"nan");
        return;
    }
    if x.is_infinite() {
        out.extend_from_slice(if x < 0.0 { b"-inf" } else { b"inf" });
        return;
    }
    // The shortest digits D and exponent q (|x| = D * 10^q) from zmij's text, whatever its
    // layout ("1.234", "1e-7", "1.5e+16"): digits without the point, leading and trailing
    // zeros dropped.
    let mut zb = zmij::Buffer::new();
    let s = zb.format_finite(x.abs()).as_bytes();
    let (mant, mut q) = match s.iter().position(|&c| c == b'e' || c == b'E') {
        Some(p) => (&s[..p], std::str::from_utf8(&s[p + 1..]).ok().and_then(|t| t.trim_start_matches('+').parse::<i32>().ok()).expect("zmij's exponent is an integer")),
        None => (s, 0),
    };
    let mut digits = [0u8; 24];
    let mut n = 0;
    let mut zeros = 0; // zeros after the last non-zero digit, held back
    let mut after_point = false;
    for &c in mant {
        if c == b'.' {
            after_point = true;
        } else if c.is_ascii_digit() {
            if after_point {
                q -= 1;
            }
            if c == b'0' {
                zeros += usize::from(n > 0);
            } else {
                if n + zeros + 1 > digits.len() {
                    panic!("zmij gave more than 24 significant digits for {x:e}");
                }
                digits[n..n + zeros].fill(b'0');
                n += zeros;
                zeros = 0;
                digits[n] = c;
                n += 1;
            }
        }
    }
    q += zeros as i32;
    if n == 0 {
        digits[0] = b'0';
        n = 1;
        q = 0;
    }
    let neg = x.is_sign_negative();
    let mut e = q + n as i32 - 1;
    if let Some((alt, alt_e)) = even_tie_digits(x.abs(), &digits[..n], q) {
        n = 0;
        for c in alt.bytes() {
            digits[n] = c;
            n += 1;
        }
        e = alt_e;
    }
    let d = &digits[..n];
    if neg {
        out.push(b'-');
    }
    if !(-4..16).contains(&e) {
        out.push(d[0]);
        if n > 1 {
            out.push(b'.');
            out.extend_from_slice(&d[1..]);
        }
        out.push(b'e');
        out.push(if e < 0 { b'-' } else { b'+' });
        let a = e.unsigned_abs();
        if a < 10 {
            out.push(b'0');
        }
        write!(out, "{a}").expect("writing to a Vec");
    } else if e >= 0 {
        let int_len = e as usize + 1;
        if n <= int_len {
            out.extend_from_slice(d);
            out.resize(out.len() + (int_len - n), b'0');
            out.extend_from_slice(b".0");
        } else {
            out.extend_from_slice(&d[..int_len]);
            out.push(b'.');
            out.extend_from_slice(&d[int_len..]);
        }
    } else {
        out.extend_from_slice(b"0.");
        out.resize(out.len() + (-e - 1) as usize, b'0');
        out.extend_from_slice(d);
    }
}

/// Where `x` (positive, finite) lies exactly halfway between two decimals of as many digits
/// as `digits` D (the shortest found, x ~ D * 10^q) that both read back as `x`, the one with
/// the even last digit (David Gay's dtoa, which CPython's repr uses, rounds half to even;
/// Rust's `{:e}` takes the upper one: repr(1648486246971105.25) is '1648486246971105.2', Rust's
/// 1648486246971105.3), as its digits (no trailing zeros) and decimal exponent e
/// (x = d.ddd * 10^e); None otherwise. Exact in integers: x = m * 2^k, and a tie next to
/// D * 10^q is x = (2D -+ 1) * 5^q * 2^(q-1); only the rare ties parse a decimal back.
fn even_tie_digits(x: f64, digits: &[u8], q: i32) -> Option<(String, i32)> {
    // a tie needs an odd last digit and x = odd * 2^(q-1) * 5^q: cheap checks first
    if digits[digits.len() - 1] % 2 == 0 || x == 0.0 {
        return None;
    }
    let bits = x.to_bits();
    let (frac, exp) = (bits & ((1 << 52) - 1), ((bits >> 52) & 0x7ff) as i32);
    let (m, k) = if exp == 0 { (frac, -1074) } else { (frac | (1 << 52), exp - 1075) };
    let t = m.trailing_zeros() as i32;
    let (m_odd, two) = (u128::from(m >> t), k + t);
    if two != q - 1 {
        return None;
    }
    let d: u64 = std::str::from_utf8(digits).ok()?.parse().ok()?;
    let pow5 = |v: u128, p: i32| (0..p.max(0)).try_fold(v, |a, _| a.checked_mul(5));
    let lhs = pow5(m_odd, -q)?;
    let alt = [d - 1, d + 1].into_iter().find(|&a| {
        let odd = u128::from(a + d); // 2D - 1 or 2D + 1
        pow5(odd, q) == Some(lhs)
    })?;
    if format!("{alt}e{q}").parse::<f64>().ok()? != x {
        return None;
    }
    let text = alt.to_string();
    let kept = text.trim_end_matches('0');
    let kept = if kept.is_empty() { "0" } else { kept };
    Some((kept.to_string(), q + text.len() as i32 - 1))
}

/// json_indent2(obj) -> str | None
///
/// `json.dumps(obj, indent=2, allow_nan=False)` of plain JSON data (exact dicts with exact
/// string keys, lists, strings, ints, finite floats, True, False, None: what `json.loads`
/// makes), character for character: ASCII only (`ensure_ascii`'s escapes, lowercase hex,
/// astral characters as surrogate pairs), floats as Python's `repr`, `[]` and `{}` when empty.
/// None for anything else (a tuple, a subclass, a non-string key, NaN or infinity, a string
/// with a lone surrogate, nesting deeper than [`JSON_MAX_DEPTH`]: a cycle), which the caller
/// hands to `json.dumps` (aqmlab.output.json_indent2). In Python the indented encoder is pure
/// Python: about 0.7 ms of a J-K suite run's CPU for its 11 kB summary.json.
#[pyfunction]
fn json_indent2(obj: &Bound<'_, PyAny>) -> Option<String> {
    let mut out = Vec::with_capacity(16 << 10);
    push_json(&mut out, obj, 0).ok()?;
    Some(String::from_utf8(out).expect("the encoder writes ASCII only"))
}

/// Nesting deeper than this is left to `json.dumps` (a cycle, which it reports).
const JSON_MAX_DEPTH: usize = 200;

/// A value [`json_indent2`] leaves to `json.dumps`.
struct NotPlainJson;

fn push_json(out: &mut Vec<u8>, o: &Bound<'_, PyAny>, depth: usize) -> Result<(), NotPlainJson> {
    use std::io::Write;
    if let Ok(s) = o.downcast_exact::<PyString>() {
        push_json_str(out, s.to_str().map_err(|_| NotPlainJson)?);
    } else if let Ok(f) = o.downcast_exact::<PyFloat>() {
        let x = f.value();
        if !x.is_finite() {
            return Err(NotPlainJson);
        }
        push_py_float_repr(out, x);
    } else if o.is_none() {
        out.extend_from_slice(b"null");
    } else if let Ok(b) = o.downcast_exact::<PyBool>() {
        out.extend_from_slice(if b.is_true() { b"true" } else { b"false" });
    } else if let Ok(i) = o.downcast_exact::<PyInt>() {
        if let Ok(v) = i.extract::<i64>() {
            write!(out, "{v}").expect("writing to a Vec");
        } else {
            // beyond 64 bits: int.__repr__, as json.dumps writes it
            out.extend_from_slice(i.repr().map_err(|_| NotPlainJson)?.to_str().map_err(|_| NotPlainJson)?.as_bytes());
        }
    } else if let Ok(d) = o.downcast_exact::<PyDict>() {
        push_json_items(out, depth, *b"{}", d.len(), d.iter(), |out, (key, value)| {
            let key = key.downcast_exact::<PyString>().map_err(|_| NotPlainJson)?;
            push_json_str(out, key.to_str().map_err(|_| NotPlainJson)?);
            out.extend_from_slice(b": ");
            push_json(out, &value, depth + 1)
        })?;
    } else if let Ok(l) = o.downcast_exact::<PyList>() {
        push_json_items(out, depth, *b"[]", l.len(), l.iter(), |out, value| push_json(out, &value, depth + 1))?;
    } else {
        return Err(NotPlainJson);
    }
    Ok(())
}

/// An object's or a list's framing at `depth`: `{}` / `[]` when empty, else each item on its
/// own line one level in, separated by commas, the closing bracket on a line of its own.
fn push_json_items<T>(
    out: &mut Vec<u8>,
    depth: usize,
    [open, close]: [u8; 2],
    len: usize,
    items: impl Iterator<Item = T>,
    mut push_item: impl FnMut(&mut Vec<u8>, T) -> Result<(), NotPlainJson>,
) -> Result<(), NotPlainJson> {
    if len == 0 {
        out.extend_from_slice(&[open, close]);
        return Ok(());
    }
    if depth >= JSON_MAX_DEPTH {
        return Err(NotPlainJson);
    }
    out.push(open);
    for (k, item) in items.enumerate() {
        if k > 0 {
            out.push(b',');
        }
        push_json_newline(out, depth + 1);
        push_item(out, item)?;
    }
    push_json_newline(out, depth);
    out.push(close);
    Ok(())
}

fn push_json_newline(out: &mut Vec<u8>, depth: usize) {
    out.push(b'\n');
    out.resize(out.len() + 2 * depth, b' ');
}

/// A JSON string as `json.encoder.encode_basestring_ascii` writes it: `\"`, `\\`, `\n`,
/// `\r`, `\t`, `\b`, `\f`, the rest of ' '..='~' as is, anything else as `\uXXXX`
/// (lowercase hex; above U+FFFF a surrogate pair).
fn push_json_str(out: &mut Vec<u8>, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let unit = |out: &mut Vec<u8>, u: u32| {
        out.extend_from_slice(b"\\u");
        for shift in [12, 8, 4, 0] {
            out.push(HEX[((u >> shift) & 0xf) as usize]);
        }
    };
    out.push(b'"');
    for c in s.chars() {
        match c {
            '"' => out.extend_from_slice(b"\\\""),
            '\\' => out.extend_from_slice(b"\\\\"),
            '\n' => out.extend_from_slice(b"\\n"),
            '\r' => out.extend_from_slice(b"\\r"),
            '\t' => out.extend_from_slice(b"\\t"),
            '\u{8}' => out.extend_from_slice(b"\\b"),
            '\u{c}' => out.extend_from_slice(b"\\f"),
            ' '..='~' => out.push(c as u8),
            _ => {
                let u = c as u32;
                if u >= 0x10000 {
                    let v = u - 0x10000;
                    unit(out, 0xd800 | (v >> 10));
                    unit(out, 0xdc00 | (v & 0x3ff));
                } else {
                    unit(out, u);
                }
            }
        }
    }
    out.push(b'"');
}

/// float_reprs(values: bytes) -> bytes
///
/// Python's `repr()` of each native-endian f64 of `values`, each followed by a newline (for
/// the tests of the CSV writer's number format).
#[pyfunction]
fn float_reprs<'py>(py: Python<'py>, values: &[u8]) -> PyResult<Bound<'py, PyBytes>> {
    if values.len() % 8 != 0 {
        return Err(PyValueError::new_err("values must be f64 bytes (a multiple of 8 long)"));
    }
    let mut out = Vec::with_capacity(values.len() * 3);
    for c in values.chunks_exact(8) {
        push_py_float_repr(&mut out, f64::from_ne_bytes(c.try_into().expect("8 bytes")));
        out.push(b'\n');
    }
    Ok(PyBytes::new(py, &out))
}

/// CsvRows(mids: list[str])
///
/// The text of the tidy CSV's rows, `<time><mid><value>\n`, where `mids[c]` is column `c`'s
/// `,<flow>,<metric>,` (already quoted as Python's csv module does); each number is Python's
/// `repr()` of the float and NaN is the empty field, as pandas' `to_csv` writes a float64
/// column (python/aqmlab/output.py's `write_csv`).
#[pyclass(frozen)]
struct CsvRows {
    mids: Vec<Vec<u8>>,
}

#[pymethods]
impl CsvRows {
    #[new]
    fn new(mids: Vec<String>) -> Self {
        CsvRows { mids: mids.into_iter().map(String::into_bytes).collect() }
    }

    /// format(time, value, col) -> bytes: the rows of the native-endian f64 bytes `time` and
    /// `value` and the native-endian i64 bytes `col` (indices into `mids`), all as long.
    fn format<'py>(&self, py: Python<'py>, time: &[u8], value: &[u8], col: &[u8]) -> PyResult<Bound<'py, PyBytes>> {
        let n = time.len() / 8;
        if time.len() % 8 != 0 || value.len() != time.len() || col.len() != time.len() {
            return Err(PyValueError::new_err("time, value and col must be 8-byte items, equally many"));
        }
        let out = py.allow_threads(|| -> Result<Vec<u8>, i64> {
            let mut out = Vec::with_capacity(n * 40);
            for i in 0..n {
                let r = 8 * i..8 * i + 8;
                let t = f64::from_ne_bytes(time[r.clone()].try_into().expect("8 bytes"));
                let v = f64::from_ne_bytes(value[r.clone()].try_into().expect("8 bytes"));
                let c = i64::from_ne_bytes(col[r].try_into().expect("8 bytes"));
                let mid = usize::try_from(c).ok().and_then(|c| self.mids.get(c)).ok_or(c)?;
                if !t.is_nan() {
                    push_py_float_repr(&mut out, t);
                }
                out.extend_from_slice(mid);
                if !v.is_nan() {
                    push_py_float_repr(&mut out, v);
                }
                out.push(b'\n');
            }
            Ok(out)
        });
        match out {
            Ok(out) => Ok(PyBytes::new(py, &out)),
            Err(c) => Err(PyValueError::new_err(format!("column index {c} out of range 0..{}", self.mids.len()))),
        }
    }
}

/// A panic in the engine (a bug: an invariant violated, an index out of range) reaches Python
/// as pyo3's `PanicException` carrying the panic's message, which `aqmlab.api` turns into one
/// `internal error: ...` line (the CLI: exit 1). Rust's default hook would first print
/// `thread '...' panicked at <file>:<line>:` and the message (and with `RUST_BACKTRACE`, a
/// backtrace) on stderr, so the user would see several lines: the hook installed here prints
/// nothing, unless `AQMLAB_DEBUG` is set (the CLI's `--debug` sets it), which keeps the
/// default report with the panic's location. Looked at only when a panic happens.
fn quiet_panics() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if std::env::var_os("AQMLAB_DEBUG").is_some_and(|v| !v.is_empty()) {
            default(info);
        }
    }));
}

#[pymodule]
fn _sim(m: &Bound<'_, PyModule>) -> PyResult<()> {
    quiet_panics();
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_function(wrap_pyfunction!(resolve, m)?)?;
    m.add_function(wrap_pyfunction!(qdisc_table, m)?)?;
    m.add_function(wrap_pyfunction!(cc_table, m)?)?;
    m.add_function(wrap_pyfunction!(scenario_schema, m)?)?;
    m.add_function(wrap_pyfunction!(float_reprs, m)?)?;
    m.add_function(wrap_pyfunction!(json_indent2, m)?)?;
    m.add_class::<RunControl>()?;
    m.add_class::<CsvRows>()?;
    m.add("RunCancelled", m.py().get_type::<RunCancelled>())?;
    m.add("ScenarioError", m.py().get_type::<ScenarioError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
