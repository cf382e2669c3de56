//! Results: samples, medians, ratios, the markdown table and the JSON file.

use serde::Serialize;

/// One repetition of one system in one workload.
#[derive(Clone, Debug, Serialize)]
pub struct Sample {
    /// Repetition number (0-based).
    pub rep: usize,
    /// The workload's metric (see [`Row::unit`]).
    pub value: f64,
    /// Records written or read.
    pub records: u64,
    /// Seconds of the timed part.
    pub secs: f64,
    /// Median commit latency, microseconds.
    pub p50_us: Option<f64>,
    /// 99th-percentile commit latency, microseconds.
    pub p99_us: Option<f64>,
    /// Records per fsync (this WAL's `Stats::records_per_fsync`; 1 for the
    /// raw loop; `None` where a peer does not report it).
    pub records_per_fsync: Option<f64>,
    /// Context switches of the writer threads per durable call (from
    /// `/proc/thread-self/status`; W1-W3, W5, W8).
    pub switches_per_call: Option<f64>,
    /// `value` divided by the limit measured in the same repetition.
    pub ratio: Option<f64>,
}

/// One system in one workload: its samples and their medians.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// Workload id and description, e.g. "W1 1 writer, 256 B, durable".
    pub workload: String,
    /// System and variant, e.g. "wal (default)".
    pub system: String,
    /// Unit of `value`: "rec/s" (higher is better), "ms" or "us" (lower).
    pub unit: String,
    /// What `ratio` divides by, e.g. "best raw".
    pub ratio_to: String,
    /// Free text (configuration, errors).
    pub note: String,
    /// Every repetition.
    pub samples: Vec<Sample>,
}

impl Row {
    fn median_of(&self, f: impl Fn(&Sample) -> Option<f64>) -> Option<f64> {
        median(self.samples.iter().filter_map(f).collect())
    }

    /// Median of the metric.
    pub fn value(&self) -> Option<f64> {
        self.median_of(|s| Some(s.value))
    }

    /// Median of the per-repetition ratios.
    pub fn ratio(&self) -> Option<f64> {
        self.median_of(|s| s.ratio)
    }

    /// Median p50 latency.
    pub fn p50(&self) -> Option<f64> {
        self.median_of(|s| s.p50_us)
    }

    /// Median p99 latency.
    pub fn p99(&self) -> Option<f64> {
        self.median_of(|s| s.p99_us)
    }

    /// Median records per fsync.
    pub fn rpf(&self) -> Option<f64> {
        self.median_of(|s| s.records_per_fsync)
    }

    /// Median context switches per call.
    pub fn switches(&self) -> Option<f64> {
        self.median_of(|s| s.switches_per_call)
    }
}

/// The median (mean of the middle two for an even count); `None` if empty.
pub fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// The `p`-th percentile (nearest rank) of latencies in ns, in microseconds.
pub fn percentile_us(sorted_ns: &[u64], p: f64) -> Option<f64> {
    if sorted_ns.is_empty() {
        return None;
    }
    let rank = ((p / 100.0) * sorted_ns.len() as f64).ceil() as usize;
    let i = rank.clamp(1, sorted_ns.len()) - 1;
    Some(sorted_ns[i] as f64 / 1000.0)
}

/// Formats a number for the table: thousands separators above 1000, three
/// significant digits below.
pub fn num(x: f64) -> String {
    if !x.is_finite() {
        return "-".into();
    }
    if x.abs() >= 1000.0 {
        let s = format!("{:.0}", x.abs());
        let mut out = String::new();
        for (i, c) in s.chars().enumerate() {
            if i > 0 && (s.len() - i) % 3 == 0 {
                out.push(',');
            }
            out.push(c);
        }
        if x < 0.0 {
            out.insert(0, '-');
        }
        out
    } else if x.abs() >= 100.0 {
        format!("{x:.0}")
    } else if x.abs() >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

fn opt(x: Option<f64>) -> String {
    x.map_or_else(|| "n/a".into(), num)
}

/// The markdown table: one line per row, medians over repetitions.
pub fn markdown(rows: &[Row]) -> String {
    let mut out = String::from(
        "| workload | system | median | p50 µs | p99 µs | rec/fsync | cs/call | ratio | ratio to | reps | note |\n\
         |---|---|---:|---:|---:|---:|---:|---:|---|---:|---|\n",
    );
    for r in rows {
        let value = r
            .value()
            .map_or_else(|| "n/a".into(), |v| format!("{} {}", num(v), r.unit));
        let ratio = r.ratio().map_or_else(|| "n/a".into(), |x| format!("{x:.2}x"));
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            r.workload,
            r.system,
            value,
            opt(r.p50()),
            opt(r.p99()),
            opt(r.rpf()),
            opt(r.switches()),
            ratio,
            r.ratio_to,
            r.samples.len(),
            r.note.replace('|', "/"),
        ));
    }
    out
}

/// Everything `--json` writes.
#[derive(Debug, Serialize)]
pub struct Report {
    /// The machine: cores, memory, kernel, filesystem of the directory.
    pub machine: Machine,
    /// The command-line settings.
    pub settings: serde_json::Value,
    /// Seconds the whole run took.
    pub total_secs: f64,
    /// Every row with its samples.
    pub rows: Vec<Row>,
}

/// Facts about the machine, read from /proc and the directory.
#[derive(Debug, Serialize)]
pub struct Machine {
    /// Available parallelism.
    pub cpus: usize,
    /// MemTotal from /proc/meminfo.
    pub memory: String,
    /// /proc/sys/kernel/osrelease.
    pub kernel: String,
    /// The load average at the start (/proc/loadavg).
    pub loadavg_start: String,
    /// The load average at the end.
    pub loadavg_end: String,
    /// Device and filesystem type of the benchmark directory (/proc/mounts).
    pub filesystem: String,
    /// Whether dropping the page cache worked (cold reads possible).
    pub drop_caches: bool,
}

fn read_trim(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// The load average now.
pub fn loadavg() -> String {
    read_trim("/proc/loadavg")
}

/// Reads what it can about the machine.
pub fn machine(dir: &std::path::Path, drop_caches: bool) -> Machine {
    let memory = read_trim("/proc/meminfo")
        .lines()
        .find(|l| l.starts_with("MemTotal"))
        .map(|l| l.trim_start_matches("MemTotal:").trim().to_string())
        .unwrap_or_default();
    // The longest mount point that is a prefix of the directory.
    let canon = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let filesystem = read_trim("/proc/mounts")
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 3 && canon.starts_with(f[1])).then(|| (f[1].len(), format!("{} on {} ({})", f[0], f[1], f[2])))
        })
        .max_by_key(|(n, _)| *n)
        .map(|(_, s)| s)
        .unwrap_or_default();
    Machine {
        cpus: std::thread::available_parallelism().map_or(0, |n| n.get()),
        memory,
        kernel: read_trim("/proc/sys/kernel/osrelease"),
        loadavg_start: loadavg(),
        loadavg_end: String::new(),
        filesystem,
        drop_caches,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_shows_medians_and_ratios() {
        let s = |rep, value, ratio| Sample {
            rep,
            value,
            records: 10,
            secs: 1.0,
            p50_us: Some(100.0),
            p99_us: Some(250.0 + rep as f64),
            records_per_fsync: Some(1.0),
            switches_per_call: Some(2.0),
            ratio: Some(ratio),
        };
        let row = Row {
            workload: "W1".into(),
            system: "wal (default)".into(),
            unit: "rec/s".into(),
            ratio_to: "best raw".into(),
            note: "a|b".into(),
            samples: vec![s(0, 4000.0, 0.9), s(1, 6000.0, 1.1), s(2, 5000.0, 1.0)],
        };
        let t = markdown(&[row]);
        let line = t.lines().nth(2).unwrap();
        assert_eq!(
            line,
            "| W1 | wal (default) | 5,000 rec/s | 100 | 251 | 1.00 | 2.00 | 1.00x | best raw | 3 | a/b |"
        );
        assert_eq!(median(vec![1.0, 3.0]), Some(2.0));
        assert_eq!(percentile_us(&[1000, 2000, 3000, 4000], 50.0), Some(2.0));
        assert_eq!(num(1_234_567.0), "1,234,567");
    }
}
