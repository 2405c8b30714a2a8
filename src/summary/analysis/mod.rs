//! The summary's numbers, pure: no text is written here.
//!
//! [`aggregate`] reads the reports in one streaming pass over the intervals
//! [`span`] keeps (the steady part of the run); [`figures`] computes the
//! fleet's, each host's and each flow's figures once, with [`spread`] for
//! the flows' delivered rates; [`coverage`] says how much of a layered
//! cycle was measured; [`diagnosis`] reads the figures into findings (WHAT
//! TO DO NEXT); [`bootstrap`] gives a change between two runs its interval.

pub mod aggregate;
pub mod bootstrap;
pub mod coverage;
pub mod diagnosis;
pub mod figures;
pub mod span;
pub mod spread;
