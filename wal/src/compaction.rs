//! What compaction merges: the options, the plan (runs of adjacent small
//! sealed segments) and the segment facts it is built from. The merge
//! itself, which changes files, is `Inner::compact_run` (lifecycle.rs).

use std::fmt;

use crate::error::{Error, Result};

/// What to compact: runs of adjacent sealed segments smaller than
/// `small_segment_bytes`, merged while the output stays within
/// `max_output_bytes`.
///
/// ```
/// let o = wal::CompactionOptions::default();
/// assert!(o.small_segment_bytes < o.max_output_bytes);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct CompactionOptions {
    /// Sealed segments below this size are candidates.
    pub small_segment_bytes: u64,
    /// Largest merged segment.
    pub max_output_bytes: u64,
}

impl CompactionOptions {
    /// Sets [`CompactionOptions::small_segment_bytes`].
    ///
    /// ```
    /// let o = wal::CompactionOptions::default().small_segment_bytes(4096).max_output_bytes(1 << 20);
    /// assert!(o.validate().is_ok());
    /// ```
    #[must_use]
    pub fn small_segment_bytes(mut self, small_segment_bytes: u64) -> Self {
        self.small_segment_bytes = small_segment_bytes;
        self
    }

    /// Sets [`CompactionOptions::max_output_bytes`].
    #[must_use]
    pub fn max_output_bytes(mut self, max_output_bytes: u64) -> Self {
        self.max_output_bytes = max_output_bytes;
        self
    }

    /// Checks the limits: both non-zero.
    pub fn validate(&self) -> Result<()> {
        if self.small_segment_bytes == 0 || self.max_output_bytes == 0 {
            return Err(Error::InvalidArgument(format!(
                "compaction: small_segment_bytes ({}) and max_output_bytes ({}) must be non-zero",
                self.small_segment_bytes, self.max_output_bytes
            )));
        }
        Ok(())
    }
}

impl Default for CompactionOptions {
    fn default() -> Self {
        CompactionOptions {
            small_segment_bytes: 4 << 20,
            max_output_bytes: 64 << 20,
        }
    }
}

/// One segment as [`crate::Wal::segments`] reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SegmentInfo {
    /// File name in the log directory.
    pub name: String,
    /// First index the segment holds (or will hold, if empty).
    pub first_index: u64,
    /// Last index it holds, `None` if empty.
    pub last_index: Option<u64>,
    /// Size of the file in bytes.
    pub bytes: u64,
    /// Sealed (immutable) or active.
    pub sealed: bool,
}

/// One merge of a compaction plan: adjacent inputs, one output.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct CompactionRun {
    /// The inputs, adjacent, in log order.
    pub inputs: Vec<SegmentInfo>,
    /// First index of the output (the first input's first).
    pub first_index: u64,
    /// Last index of the output (the last input's last).
    pub last_index: u64,
    /// Bytes of the inputs.
    pub input_bytes: u64,
}

/// A compaction plan: what [`crate::Wal::compact`] would do (or did).
/// `Display` prints it, for a dry run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CompactionPlan {
    /// The merges, in log order.
    pub runs: Vec<CompactionRun>,
}

impl fmt::Display for CompactionPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.runs.is_empty() {
            return writeln!(f, "nothing to compact");
        }
        for run in &self.runs {
            writeln!(
                f,
                "merge {} segments, indices {}..={}, {} bytes:",
                run.inputs.len(),
                run.first_index,
                run.last_index,
                run.input_bytes
            )?;
            for s in &run.inputs {
                writeln!(f, "  {} ({} bytes)", s.name, s.bytes)?;
            }
        }
        Ok(())
    }
}

impl CompactionPlan {
    /// Plans merges over `segments` (in log order): runs of at least two
    /// adjacent sealed segments, each below the small size, whose sum fits.
    pub(crate) fn build(segments: &[SegmentInfo], opts: CompactionOptions) -> CompactionPlan {
        let mut runs = Vec::new();
        let mut current: Vec<SegmentInfo> = Vec::new();
        let flush = |current: &mut Vec<SegmentInfo>, runs: &mut Vec<CompactionRun>| {
            if current.len() >= 2 {
                let inputs = std::mem::take(current);
                let first_index = inputs[0].first_index;
                let last_index = inputs[inputs.len() - 1].last_index.unwrap_or(first_index);
                let input_bytes = inputs.iter().map(|s| s.bytes).sum();
                runs.push(CompactionRun {
                    inputs,
                    first_index,
                    last_index,
                    input_bytes,
                });
            }
            current.clear();
        };
        for s in segments {
            let small = s.sealed && s.last_index.is_some() && s.bytes < opts.small_segment_bytes;
            if !small {
                flush(&mut current, &mut runs);
                continue;
            }
            let total: u64 = current.iter().map(|c| c.bytes).sum::<u64>() + s.bytes;
            if total > opts.max_output_bytes {
                flush(&mut current, &mut runs);
            }
            current.push(s.clone());
        }
        flush(&mut current, &mut runs);
        CompactionPlan { runs }
    }
}
