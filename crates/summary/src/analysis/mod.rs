//! The summary's numbers and what they mean, pure: nothing here lays out a
//! table, a document or a page (the findings carry their own sentences).
//!
//! [`aggregate`] reads the reports in two streaming passes, the steady
//! intervals ([`span`]) then the counts over them; [`figures`] computes the
//! fleet's, each host's and each flow's figures once, with [`spread`] for
//! the flows' delivered rates; [`coverage`] says how much of a layered
//! cycle was measured; [`diagnosis`] reads the figures into findings (WHAT
//! TO DO NEXT); [`bootstrap`] gives a change between two runs its interval;
//! [`routes`] follows each way's length in routers, interval by interval.

pub mod aggregate;
pub mod bootstrap;
pub mod coverage;
pub mod diagnosis;
pub mod figures;
pub mod links;
pub mod routes;
pub mod span;
pub mod spread;
