//! The benchmark's flags, each with the default the docs quote.

use std::time::Duration;

/// What to measure.
pub(crate) enum Mode {
    /// Enqueues, drains, the drain over a long history, and wake-up latency.
    Standard,
    /// `--processes 1,2,4`: the same jobs drained by that many worker processes, in turn.
    Fleet(Vec<usize>),
    /// `--soak SECONDS`: enqueue and drain at a steady rate, reporting each minute.
    Soak(u64),
    /// `--fleet-worker`: one process of a fleet drain (started by `Fleet`, not by hand).
    FleetWorker,
}

pub(crate) struct Settings {
    pub(crate) mode: Mode,
    /// `--single N`: tasks enqueued one at a time.
    pub(crate) single: u64,
    /// `--bulk N`: tasks enqueued through `enqueue_many`, `--bulk-batch N` a call.
    pub(crate) bulk: u64,
    pub(crate) bulk_batch: u64,
    /// `--concurrency N`: each worker's slots.
    pub(crate) concurrency: usize,
    /// `--latency N` tasks, `--latency-gap-ms N` apart.
    pub(crate) latency: u64,
    pub(crate) latency_gap: Duration,
    /// `--completed N`: the history of the second drain (0 skips it).
    pub(crate) completed: u64,
    /// `--modes 0|1`: whether to drain with each choice of completions, besides the default.
    pub(crate) modes: bool,
    /// `--rate N`: the soak's jobs a second (default: half of what the worker sustains).
    pub(crate) rate: Option<u64>,
    /// `--soak-every-ms N`: how often the soak enqueues a batch, its jobs of that interval.
    pub(crate) soak_every: Duration,
    /// `--observe 1`: run with an INFO log subscriber and a metrics recorder installed, as an
    /// observed application does; `2` installs the subscriber alone, `3` the recorder alone.
    pub(crate) observe: u64,
    /// `--queue-limit-factor N`: the limited drain's queue limit, in multiples of the worker's
    /// concurrency (at least 1: a limit that never binds on one worker).
    pub(crate) queue_limit_factor: u64,
}

impl Settings {
    pub(crate) fn from_args(args: impl Iterator<Item = String>) -> Result<Self, String> {
        let mut s = Self {
            mode: Mode::Standard,
            single: 10_000,
            bulk: 100_000,
            bulk_batch: 10_000,
            concurrency: 16,
            latency: 200,
            latency_gap: Duration::from_millis(20),
            completed: 1_000_000,
            modes: true,
            rate: None,
            soak_every: Duration::from_millis(1),
            observe: 0,
            queue_limit_factor: 2,
        };
        let args: Vec<String> = args.collect();
        let mut rest = args.iter();
        while let Some(flag) = rest.next() {
            if flag == "--fleet-worker" {
                s.mode = Mode::FleetWorker;
                continue;
            }
            let value = rest.next().ok_or_else(|| format!("{flag} needs a value"))?;
            let number = || -> Result<u64, String> {
                value
                    .parse()
                    .map_err(|_| format!("{flag} needs a number, not {value:?}"))
            };
            match flag.as_str() {
                "--single" => s.single = number()?,
                "--bulk" => s.bulk = number()?,
                "--bulk-batch" => s.bulk_batch = number()?.max(1),
                "--concurrency" => s.concurrency = number()?.max(1) as usize,
                "--latency" => s.latency = number()?,
                "--latency-gap-ms" => s.latency_gap = Duration::from_millis(number()?),
                "--completed" => s.completed = number()?,
                "--modes" => s.modes = number()? != 0,
                "--rate" => s.rate = Some(number()?.max(1)),
                "--soak-every-ms" => s.soak_every = Duration::from_millis(number()?.max(1)),
                "--observe" => s.observe = number()?,
                "--queue-limit-factor" => s.queue_limit_factor = number()?.max(1),
                "--soak" => s.mode = Mode::Soak(number()?.max(60)),
                "--processes" => {
                    let counts = value
                        .split(',')
                        .map(|n| n.trim().parse::<usize>().ok().filter(|&n| n > 0))
                        .collect::<Option<Vec<_>>>()
                        .ok_or_else(|| {
                            format!("--processes needs counts like 1,2,4, not {value:?}")
                        })?;
                    s.mode = Mode::Fleet(counts);
                }
                other => return Err(format!("unknown flag {other}")),
            }
        }
        Ok(s)
    }
}
