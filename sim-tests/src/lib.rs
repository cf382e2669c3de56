//! Deterministic simulation of the WAL under madsim (see `docs/SIMULATION.md`).
//!
//! One seed decides a whole run ([`config::RunConfig`]): how many writers,
//! which sync policy, which faults and how often. [`runner::run_seed`] runs
//! it inside a madsim runtime on a [`simfs::SimFs`], checks every result
//! against the [`oracle`], and returns a [`runner::Report`].
//!
//! Modules:
//! * [`config`]: the swarm configuration decoded from a seed;
//! * [`payload`]: self-describing records;
//! * [`api`]: the log under test as a trait object;
//! * [`workload`]: the tasks of a round;
//! * [`oracle`]: what the log may and must contain;
//! * [`leases`]: the live iterators, and what each prune may and must remove;
//! * [`damage`]: where records sit, and which recorded damage explains a loss;
//! * [`runner`]: one seed, start to heal;
//! * [`coverage`]: fault counts, rare-path marks, check counts;
//! * [`shrink`]: minimise a failing configuration;
//! * [`broken`]: deliberately broken filesystems and WALs that the sweep must catch;
//! * [`repair`]: the operator's tools for damage no open mode gets past;
//! * [`sweep`]: many seeds, sequentially or on several threads;
//! * [`tamper`]: tampering with the directory between runs, judged and undone.
#![forbid(unsafe_code)]

pub mod api;
pub mod broken;
pub mod config;
pub mod coverage;
pub mod damage;
pub mod leases;
pub mod oracle;
pub mod payload;
pub mod repair;
pub mod runner;
pub mod shrink;
pub mod sweep;
pub mod tamper;
pub mod workload;
