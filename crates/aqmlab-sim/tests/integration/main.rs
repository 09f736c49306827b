//! The integration tests of aqmlab-sim, one module per area, compiled as ONE test binary (a
//! binary per file costs a link with LTO each; see Cargo.toml `[profile.test-release]`).

mod common;
mod cascade;
mod cc_bbr;
mod cc_cubic_era;
mod cc_prague;
mod cc_sce;
mod determinism;
mod netem;
mod probe;
mod qdisc_cake;
mod qdisc_codel;
mod qdisc_dualpi2;
mod qdisc_pie;
mod qdisc_red;
mod qdisc_sce;
mod qdisc_sparse_probe;
mod scenarios;
mod schedule;
mod scream;
mod tcp_reordering;
mod tcp_system;
mod topology;
mod traffic;
mod tunnel;
mod udp;
mod tcp_gso;
mod tcp_ns2;
mod host_noise;
mod golden;
mod pathologies;
mod limits;
mod fuzz;
