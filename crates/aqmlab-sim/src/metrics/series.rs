//! Grid-sampled time series. Columns are registered before the run; at each tick of the
//! sampling grid every column gets exactly one value (NaN when undefined), so the memory
//! used is columns x ticks, fixed by the scenario, not by traffic.

/// Handle of a registered column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeriesId(usize);

/// One named series.
#[derive(Clone, Debug)]
pub struct Column {
    /// What is measured: a flow name, `"bottleneck"`, ...
    pub entity: String,
    /// The quantity, e.g. `"goodput"`.
    pub metric: String,
    pub unit: &'static str,
    pub values: Vec<f64>,
}

/// All series of a run on a shared time grid (seconds).
#[derive(Clone, Debug, Default)]
pub struct Series {
    /// The run's tick `time[0]` is: 0, unless the recorder streamed the ticks before it
    /// ([`SeriesRecorder::stream_to`]).
    pub first_tick: usize,
    pub time: Vec<f64>,
    pub columns: Vec<Column>,
}

impl Series {
    pub fn get(&self, entity: &str, metric: &str) -> Option<&Column> {
        self.columns.iter().find(|c| c.entity == entity && c.metric == metric)
    }
}

/// One tick of the sampling grid, as the endpoints see it when they record their series.
#[derive(Clone, Copy, Debug)]
pub struct Tick {
    pub now: crate::time::Time,
    /// `now` in seconds.
    pub t: f64,
    /// The grid step in seconds.
    pub step_s: f64,
    /// How far back a flow keeps its delivery-rate samples ([`super::steady_horizon`] of the
    /// run's `[metrics] steady_window`): the same for every flow, so it is the run's, not
    /// stored in each flow's sampled fields.
    pub horizon_s: f64,
}

/// A block of consecutive ticks drained from a [`SeriesRecorder`] while the run goes on
/// ([`SeriesRecorder::stream_to`]): the ticks `first_tick .. first_tick + time.len()` of the
/// run, and for each of the first `columns` registered columns its values there, column
/// after column (`values[c * time.len() + i]`). A column registered after this chunk was
/// drained (a qdisc swap's new series) is NaN over it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SeriesChunk {
    pub first_tick: usize,
    pub time: Vec<f64>,
    pub columns: usize,
    pub values: Vec<f64>,
}

/// Where [`SeriesRecorder::stream_to`] sends its chunks.
pub type ChunkSink = Box<dyn FnMut(SeriesChunk) + Send>;

/// Builds a [`Series`] tick by tick; with [`SeriesRecorder::stream_to`] it hands the ticks
/// over in chunks while the run goes on, so what it holds is bounded by the chunk size, not
/// by the simulated duration.
///
/// The values are held row by row (a row per tick) and become columns only when drained or
/// finished: a sampling pass over every flow then writes one contiguous row instead of one
/// value into each of `5 x flows` separately allocated column vectors, each behind its own
/// 88-byte column header (issue #15: with 1000 flows that pass touched ~10,000 cache lines
/// per tick, 8 % of the run's L1 misses; now ~600). The rows follow each other in one flat
/// buffer rather than a vector each (session 9: a 30 s `jarvinen-kojo` cell spent ~330
/// instructions a tick allocating and filling its row, and `finish` ~22 a value reading
/// through the row vectors and shrinking them).
#[derive(Default)]
pub struct SeriesRecorder {
    /// The columns' names and units, and the ticks not drained yet (all of them without a
    /// sink); `columns[c].values` stay empty until `drain`/`finish`.
    series: Series,
    /// The held ticks' values, row after row, a row holding the columns registered by then
    /// (a column registered later is NaN there).
    values: Vec<f64>,
    /// Where the current (last) row starts in `values`.
    row: usize,
    /// The held rows' widths, as runs of equal width: `(first tick, width)`, the run going
    /// on to the next one's first tick (or the last held tick). Columns are only added, so
    /// the widths only grow; one run unless a column was registered during the run.
    widths: Vec<(usize, usize)>,
    capacity: usize,
    /// Ticks already handed to the sink.
    drained: usize,
    sink: Option<ChunkSink>,
    /// Drain when the buffered values (ticks x columns) reach this many.
    chunk_values: usize,
}

impl std::fmt::Debug for SeriesRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SeriesRecorder")
            .field("series", &self.series)
            .field("drained", &self.drained)
            .field("streaming", &self.sink.is_some())
            .finish()
    }
}

impl SeriesRecorder {
    pub fn with_ticks(ticks: usize) -> Self {
        SeriesRecorder { capacity: ticks, ..Default::default() }
    }
    /// From now on, hands the recorded ticks to `sink` in chunks of about `chunk_values`
    /// values (ticks x columns, at least one tick), between ticks, instead of keeping them
    /// all: what the recorder holds stays below one chunk whatever the run's duration. The
    /// ticks still held at the end are [`SeriesRecorder::finish`]'s (with `first_tick` =
    /// [`SeriesRecorder::drained`]), so a run short enough never calls the sink.
    pub fn stream_to(&mut self, sink: ChunkSink, chunk_values: usize) {
        self.sink = Some(sink);
        self.chunk_values = chunk_values.max(1);
        self.capacity = self.capacity.min(self.chunk_values / self.series.columns.len().max(1) + 1);
        self.values.shrink_to(self.capacity * self.series.columns.len());
        self.series.time.shrink_to(self.capacity);
    }
    /// A column registered during the run (a qdisc swap brings new queue series) is NaN for
    /// the ticks already recorded (and for the current one unless it is `set`), so every
    /// column has one value per tick.
    pub fn register(&mut self, entity: &str, metric: &str, unit: &'static str) -> SeriesId {
        let id = self.series.columns.len();
        self.series.columns.push(Column { entity: entity.to_string(), metric: metric.to_string(), unit, values: Vec::new() });
        if let Some(current) = self.series.time.len().checked_sub(1) {
            // The current row, the last in `values`, grows by the new column.
            self.values.push(f64::NAN);
            match self.widths.last_mut() {
                Some(run) if run.0 == current => run.1 = id + 1,
                _ => self.widths.push((current, id + 1)),
            }
        }
        SeriesId(id)
    }
    /// Starts a new tick at `t` seconds; every column must then be `set` once (one left
    /// unset is NaN there). With a sink, the ticks before it are drained first when they
    /// fill a chunk.
    pub fn tick(&mut self, t: f64) {
        if self.sink.is_some() && !self.series.time.is_empty() && self.buffered_values() >= self.chunk_values {
            let chunk = self.drain();
            (self.sink.as_mut().expect("checked"))(chunk);
        }
        let width = self.series.columns.len();
        if self.widths.last().is_none_or(|&(_, w)| w != width) {
            self.widths.push((self.series.time.len(), width));
        }
        if self.values.capacity() == 0 {
            self.values.reserve(self.capacity.max(1) * width);
        }
        self.series.time.push(t);
        self.row = self.values.len();
        self.values.resize(self.row + width, f64::NAN);
    }
    #[inline]
    pub fn set(&mut self, id: SeriesId, v: f64) {
        // Every registered column is in the current row (`register` grows it).
        self.values[self.row + id.0] = v;
    }
    /// Ticks handed to the sink so far.
    pub fn drained(&self) -> usize {
        self.drained
    }
    /// Values held now (ticks x columns, the time grid's own included).
    pub fn buffered_values(&self) -> usize {
        self.series.time.len() * (self.series.columns.len() + 1)
    }
    /// The held rows as runs of equal width: `(offset in values, ticks, width)`.
    fn runs(&self) -> impl Iterator<Item = (usize, usize, usize)> + '_ {
        let ticks = self.series.time.len();
        let mut offset = 0;
        self.widths.iter().enumerate().map(move |(i, &(first, width))| {
            let n = self.widths.get(i + 1).map_or(ticks, |r| r.0) - first;
            let run = (offset, n, width);
            offset += n * width;
            run
        })
    }
    /// Appends to `out[k]` the held values of column `c0 + k` (NaN in the rows before it
    /// was registered). The columns of `out` (eight at most: one or two cache lines of each
    /// row) are read a tile of rows at a time, each column in turn: the tile's lines stay in
    /// L1 for the next column, where a pass over every row per column read a line of each
    /// row for one value (issue #15, session 7: at 1000 flows about two L1 misses per value).
    fn gather(&self, c0: usize, out: &mut [Vec<f64>]) {
        const TILE: usize = 64;
        for (offset, n, width) in self.runs() {
            let rows = &self.values[offset..offset + n * width];
            let present = width.saturating_sub(c0).min(out.len());
            // Rows without any of these columns are NaN below; so are rows of no column at
            // all (ticks before the first was registered), which `chunks` cannot tile.
            if present > 0 {
                for tile in rows.chunks(TILE * width) {
                    for (k, col) in out[..present].iter_mut().enumerate() {
                        col.extend(tile.chunks_exact(width).map(|row| row[c0 + k]));
                    }
                }
            }
            for col in &mut out[present..] {
                col.extend(std::iter::repeat_n(f64::NAN, n));
            }
        }
    }
    /// Takes every tick recorded so far (call between ticks, when each column of the last
    /// one is set) as one chunk; the columns stay registered and go on from the next tick.
    pub fn drain(&mut self) -> SeriesChunk {
        let ticks = self.series.time.len();
        let cols = self.series.columns.len();
        let mut values = Vec::with_capacity(ticks * cols);
        for c0 in (0..cols).step_by(8) {
            let mut block: Vec<Vec<f64>> = (c0..(c0 + 8).min(cols)).map(|_| Vec::with_capacity(ticks)).collect();
            self.gather(c0, &mut block);
            block.iter().for_each(|col| values.extend_from_slice(col));
        }
        self.values.clear();
        self.widths.clear();
        let chunk = SeriesChunk { first_tick: self.drained, time: std::mem::take(&mut self.series.time), columns: cols, values };
        self.series.time = Vec::with_capacity(ticks);
        self.drained += ticks;
        chunk
    }
    /// The ticks still held (every tick of the run unless it streamed: then those after
    /// [`SeriesRecorder::drained`]), each column one value per tick.
    pub fn finish(mut self) -> Series {
        let ticks = self.series.time.len();
        let mut columns = std::mem::take(&mut self.series.columns);
        // From the last columns to the first, an eighth of them (at least 256) at a time,
        // the rows cut after each block is built: the run's values are held about once, not
        // twice, at the end, for copying the rows kept about four times in all.
        let block = (columns.len() / 8).max(256);
        let mut hi = columns.len();
        while hi > 0 {
            let lo = hi.saturating_sub(block);
            for c0 in (lo..hi).step_by(8) {
                let c1 = (c0 + 8).min(hi);
                let mut block: Vec<Vec<f64>> = (c0..c1).map(|_| Vec::with_capacity(ticks)).collect();
                self.gather(c0, &mut block);
                for (column, values) in columns[c0..c1].iter_mut().zip(block) {
                    column.values = values;
                }
            }
            if lo > 0 {
                self.cut_rows(lo);
            }
            hi = lo;
        }
        self.series.columns = columns;
        self.series.first_tick = self.drained;
        self.series
    }
    /// Keeps the first `keep` columns of each held row, the rows moved up in place, and
    /// gives the rest of the buffer back.
    fn cut_rows(&mut self, keep: usize) {
        let runs: Vec<_> = self.runs().collect();
        let mut to = 0;
        for (offset, n, width) in runs {
            let kept = width.min(keep);
            for r in 0..n {
                let from = offset + r * width;
                self.values.copy_within(from..from + kept, to);
                to += kept;
            }
        }
        for run in &mut self.widths {
            run.1 = run.1.min(keep);
        }
        self.values.truncate(to);
        self.values.shrink_to_fit();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A column registered after some ticks (a qdisc swap's new queue series) and a column no
    /// longer set (the swapped-out qdisc's) both end with one value per tick, NaN where unset.
    #[test]
    fn late_and_abandoned_columns_are_nan_padded() {
        let mut r = SeriesRecorder::with_ticks(4);
        let a = r.register("bottleneck", "a", "ms");
        let old = r.register("bottleneck", "old", "ms");
        r.tick(0.0);
        r.set(a, 1.0);
        r.set(old, 5.0);
        r.tick(0.05);
        r.set(a, 2.0);
        let new = r.register("bottleneck", "new", "ms");
        r.set(new, 7.0);
        r.tick(0.1);
        r.set(a, 3.0);
        r.set(new, 8.0);
        let s = r.finish();
        let v = |m: &str| s.get("bottleneck", m).unwrap().values.clone();
        assert_eq!(v("a"), vec![1.0, 2.0, 3.0]);
        let old = v("old");
        assert_eq!(old.len(), 3);
        assert!(old[0] == 5.0 && old[1].is_nan() && old[2].is_nan());
        let new = v("new");
        assert!(new[0].is_nan() && new[1] == 7.0 && new[2] == 8.0);
    }
    /// Ticks recorded before any column is registered (rows of no values), then a column:
    /// it is NaN at those ticks, in `finish` and in a drained chunk alike.
    #[test]
    fn ticks_before_the_first_column_are_nan_in_it() {
        for drain in [false, true] {
            let mut r = SeriesRecorder::with_ticks(4);
            r.tick(0.0);
            r.tick(1.0);
            let id = r.register("f", "late", "");
            r.set(id, 5.0);
            r.tick(2.0);
            r.set(id, 6.0);
            let values = if drain { r.drain().values } else { r.finish().columns.remove(0).values };
            assert!(values[0].is_nan() && values[1] == 5.0 && values[2] == 6.0 && values.len() == 3, "drain {drain}: {values:?}");
        }
    }
    /// Wide enough for `finish` to build its columns in blocks, cutting the rows between
    /// them, with a column registered mid-run: every value lands in its column.
    #[test]
    fn finish_in_blocks_keeps_every_value_in_place() {
        let mut r = SeriesRecorder::with_ticks(10);
        let mut ids: Vec<SeriesId> = (0..600).map(|c| r.register("f", &format!("m{c}"), "")).collect();
        for t in 0..10 {
            r.tick(t as f64);
            if t == 4 {
                ids.push(r.register("q", "late", ""));
            }
            for (c, &id) in ids.iter().enumerate() {
                r.set(id, (c * 100 + t) as f64);
            }
        }
        let s = r.finish();
        assert_eq!(s.columns.len(), 601);
        for (c, col) in s.columns.iter().enumerate() {
            for (t, &v) in col.values.iter().enumerate() {
                if c == 600 && t < 4 {
                    assert!(v.is_nan(), "column {c} tick {t}");
                } else {
                    assert_eq!(v, (c * 100 + t) as f64, "column {c} tick {t}");
                }
            }
            assert_eq!(col.values.len(), 10);
        }
    }
    /// Streaming: the recorder never holds more than one chunk (plus the tick being filled),
    /// whatever the number of ticks, and the chunks plus what `finish` keeps are exactly the
    /// series the recorder keeps without a sink, a late column NaN over the earlier chunks.
    #[test]
    fn streaming_holds_one_chunk_and_the_chunks_are_the_whole_series() {
        use std::sync::{Arc, Mutex};
        let record = |r: &mut SeriesRecorder, held: &mut usize| {
            let a = r.register("f", "a", "ms");
            let b = r.register("f", "b", "ms");
            let mut late = None;
            for i in 0..10_000usize {
                r.tick(i as f64 * 0.01);
                r.set(a, i as f64);
                if i % 3 != 0 {
                    r.set(b, -(i as f64)); // b is unset on every third tick: NaN there
                }
                if i == 4_321 {
                    late = Some(r.register("q", "late", ""));
                }
                if let Some(l) = late {
                    r.set(l, 0.5 * i as f64);
                }
                *held = (*held).max(r.buffered_values());
            }
        };
        let mut plain = SeriesRecorder::with_ticks(10_000);
        let mut held_plain = 0;
        record(&mut plain, &mut held_plain);
        let whole = plain.finish();

        let chunks = Arc::new(Mutex::new(Vec::<SeriesChunk>::new()));
        let sink = chunks.clone();
        let mut r = SeriesRecorder::with_ticks(10_000);
        r.stream_to(Box::new(move |c| sink.lock().unwrap().push(c)), 300);
        let mut held = 0;
        record(&mut r, &mut held);
        let drained = r.drained();
        let rest = r.finish();
        // Bounded: at most one chunk (300 values) plus one tick of 4 values (time + 3 columns).
        assert!(held <= 300 + 4, "held {held}");
        assert_eq!(held_plain, 10_000 * 4, "without a sink everything is held");
        let chunks = chunks.lock().unwrap();
        assert!(chunks.len() > 30, "{} chunks", chunks.len());
        assert!(chunks.iter().all(|c| c.values.len() == c.time.len() * c.columns && c.values.len() <= 300));
        assert_eq!(rest.first_tick, drained);
        // Rebuild each column from the chunks and the rest.
        let mut time: Vec<f64> = Vec::new();
        let mut cols: Vec<Vec<f64>> = vec![Vec::new(); 3];
        for c in chunks.iter() {
            assert_eq!(c.first_tick, time.len());
            time.extend(&c.time);
            let n = c.time.len();
            for (k, col) in cols.iter_mut().enumerate() {
                if k < c.columns {
                    col.extend(&c.values[k * n..(k + 1) * n]);
                } else {
                    col.extend(std::iter::repeat(f64::NAN).take(n));
                }
            }
        }
        time.extend(&rest.time);
        for (k, col) in cols.iter_mut().enumerate() {
            col.extend(&rest.columns[k].values);
        }
        assert_eq!(time, whole.time);
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        for (k, col) in cols.iter().enumerate() {
            assert_eq!(bits(col), bits(&whole.columns[k].values), "column {k}");
        }
        assert!(whole.columns[1].values[3].is_nan() && whole.columns[2].values[4_320].is_nan() && whole.columns[2].values[4_321] == 0.5 * 4_321.0);
    }
}
