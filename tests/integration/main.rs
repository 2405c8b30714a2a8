//! mx's integration tests: one binary, one module per area.
//!
//! Tests that run the `mx` executable do so in a temporary directory with every
//! `MX_*` variable removed, so the machine's environment cannot leak in.

mod agents;
mod capture;
mod util;

mod agent_behaviour;
mod agent_traffic;
mod bad_files;
mod cli_help;
mod compare;
mod cpython_vectors;
mod disk;
mod disk_reports;
mod dscp;
mod export;
mod fleet_local;
mod fuzz;
mod gen_check_hints_golden;
mod hand_edited;
mod hostile_network;
mod json_outputs;
mod lab;
mod lab_compare;
mod lab_diagnosis;
mod lab_fabric;
mod lab_faults;
mod lab_monitor;
mod lab_pools;
mod lab_ramp;
mod lab_security;
mod lab_slurm;
mod lab_truth;
mod layering;
mod legs;
mod malformed_input;
mod manual;
mod metrics;
mod over_plan;
mod pools;
mod progress;
mod properties;
mod ramp;
mod report_page;
mod schedule;
mod slices;
mod streams;
mod summarize;
mod trace;
mod values;
