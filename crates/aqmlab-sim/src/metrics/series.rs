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
}

/// Builds a [`Series`] tick by tick.
#[derive(Debug, Default)]
pub struct SeriesRecorder {
    series: Series,
    capacity: usize,
}

impl SeriesRecorder {
    pub fn with_ticks(ticks: usize) -> Self {
        SeriesRecorder { series: Series::default(), capacity: ticks }
    }
    /// A column registered during the run (a qdisc swap brings new queue series) starts with
    /// NaN for the ticks already recorded (`set` and `finish` pad the rest), so every column
    /// has one value per tick.
    pub fn register(&mut self, entity: &str, metric: &str, unit: &'static str) -> SeriesId {
        let mut values = Vec::with_capacity(self.capacity.max(self.series.time.len()));
        // Up to the tick before the current one: `set` pads the rest, so registering between
        // ticks or after `tick` and before `set` both come out one value per tick.
        values.resize(self.series.time.len().saturating_sub(1), f64::NAN);
        self.series.columns.push(Column { entity: entity.to_string(), metric: metric.to_string(), unit, values });
        SeriesId(self.series.columns.len() - 1)
    }
    /// Starts a new tick at `t` seconds; every column must then be `set` once.
    pub fn tick(&mut self, t: f64) {
        self.series.time.push(t);
    }
    pub fn set(&mut self, id: SeriesId, v: f64) {
        let ticks = self.series.time.len();
        let col = &mut self.series.columns[id.0].values;
        // A column no longer set for some ticks (its qdisc was swapped out) gets NaN there.
        col.resize(ticks.saturating_sub(1).max(col.len()), f64::NAN);
        debug_assert_eq!(col.len() + 1, ticks, "one value per column per tick");
        col.push(v);
    }
    pub fn finish(mut self) -> Series {
        let ticks = self.series.time.len();
        for c in &mut self.series.columns {
            c.values.resize(ticks, f64::NAN);
        }
        self.series
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
}
