//! mx: a request/response UDP traffic matrix across a fleet of servers.
//!
//! Every host sends requests of `tx_size` bytes to its peers; each receiver answers
//! with a reply of `rx_size` bytes; mx reports packets per second, loss split into
//! the forward and return legs, and round-trip time. The same binary is the
//! operator's controller and the agent on every host.
//!
//! Modules by concern:
//! - [`matrix`]: `matrix.csv` and the shapes `mx gen` draws (full mesh, `--peers`,
//!   `--dwell` layers), bit-compatible with the original Python tool, and the
//!   load arithmetic behind `mx check` and `mx hints` ([`matrix::load`]);
//! - [`agent`]: `mx agent`, the traffic engine every host runs, over [`agent::wire`]
//!   (the MXO1 header) and writing [`report`] rows and an [`agent::stamp`];
//! - [`summary`]: `mx summarize`, report sets turned into answers, and
//!   [`export`], the same numbers as floor-plan overlays;
//! - [`monitor`]: always on: the Prometheus targets, rules and the Grafana
//!   dashboard of a fleet of agents serving `/metrics`, from the matrix;
//! - [`fleet`]: files and processes moved to the hosts, over ssh (or a local
//!   sandbox per host);
//! - [`commands`]: one module per sub-command: checks its flags, composes the
//!   steps (collect, then summarize), prints what the user sees;
//! - [`cli`]: the command line, declared once and rendered into every help text;
//! - [`units`], [`error`], [`files`]: shared number formats, the exit-code
//!   contract, and files written whole or not at all.

// `unsafe` lives in one room: the kernel side of the socket fast path
// (`agent::udp::sys`: the sendmmsg/recvmmsg calls, their C structs and
// control messages), the one module that allows it.
#![deny(unsafe_code)]

pub mod agent;
pub mod cli;
pub mod commands;
pub mod error;
pub mod export;
pub mod files;
pub mod fleet;
pub mod input;
pub mod matrix;
pub mod monitor;
pub mod private_dir;
pub mod report;
pub mod summary;
pub mod units;
