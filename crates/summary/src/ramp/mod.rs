//! Finding the limit (`mx run --ramp`), the pure part: which rate scales a
//! ramp tries and in what order ([`plan`]), each step's figures and whether
//! it held ([`mod@verdict`]), and the table, the answer and the JSON document of
//! the steps ([`mod@render`]); a ramp read back from its reports
//! ([`recorded`], `mx summarize` over one). The fleet is driven by `commands::run::ramp`.

pub mod plan;
pub mod recorded;
pub mod render;
pub mod verdict;

pub use plan::{
    BISECT_WITHIN, DEFAULT_STEPS, Kind, MAX_BISECT_STEPS, MAX_STEPS, Plan, SUGGESTED_RANGE, round4,
    scale_text,
};
pub use render::{
    Document, HeldDoc, RampDoc, SCHEMA, StepDoc, conclusion, document, steps_text, table_header,
    table_row, to_json,
};
pub use verdict::{
    DEFAULT_MIN_DELIVERED, MAX_TRIES, ShortOfCpu, StepFigures, StepResult, Thresholds, Verdict,
    highest_held, parse_micros, step_figures, tried_again, verdict,
};

#[cfg(test)]
mod fixtures;
