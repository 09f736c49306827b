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
    /// NaN for the ticks already recorded, so every column has one value per tick.
    pub fn register(&mut self, entity: &str, metric: &str, unit: &'static str) -> SeriesId {
        let mut values = Vec::with_capacity(self.capacity.max(self.series.time.len()));
        values.resize(self.series.time.len(), f64::NAN);
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
