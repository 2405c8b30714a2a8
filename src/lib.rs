//! mx: a request/response UDP traffic matrix across a fleet of servers.
//!
//! Every host sends requests of `tx_size` bytes to its peers; each receiver answers
//! with a reply of `rx_size` bytes; mx reports packets per second, loss split into
//! the forward and return legs, and round-trip time. The same binary is the
//! operator's controller and the agent on every host.
//!
//! This crate is the `mx` binary's: the command line and the commands, and
//! the two pure renderings that are the binary's alone (the monitor's
//! Prometheus files and the floor-plan export). The layers beneath are
//! crates of their own (`crates/`), and Cargo's graph holds their order:
//! - [`matrix`] (`mx-matrix`): `matrix.csv` and the shapes `mx gen` draws,
//!   bit-compatible with the original Python tool, and the load arithmetic
//!   behind `mx check` and `mx hints`;
//! - [`agent`] (`mx-agent`): `mx agent`, the traffic engine every host runs,
//!   over [`agent::udp`] (`mx-udp`, the only `unsafe`) and [`agent::wire`]
//!   (`mx-wire`, the MXO1 header), writing [`report`] (`mx-report`) rows;
//! - [`summary`] (`mx-summary`): `mx summarize`, report sets turned into
//!   answers, with no I/O of its own;
//! - [`fleet`] (`mx-fleet`): files and processes moved to the hosts, over
//!   ssh, Slurm or a local sandbox per host;
//! - [`units`], [`error`], [`files`], [`private_dir`], [`input`]
//!   (`mx-base`): number formats, the exit-code contract, files written
//!   whole or not at all.
//!
//! Here: [`commands`], one module per sub-command (checks its flags,
//! composes the steps, prints what the user sees); [`cli`], the command line
//! declared once; [`monitor`] and [`export`].

#![forbid(unsafe_code)]

pub mod cli;
pub mod commands;
pub mod export;
pub mod monitor;

pub use mx_agent as agent;
pub use mx_base::{error, files, input, private_dir, units};
pub use mx_fleet as fleet;
pub use mx_matrix as matrix;
pub use mx_report as report;
pub use mx_summary as summary;
