//! `mx compare A B`: did the change between two runs help?
//!
//! Two summary documents ([`super::document`]) side by side: the fleet's
//! figures, each pool direction's, each host's, and the flows that changed
//! most. Every change carries a 95% interval taken from the runs themselves
//! ([`super::analysis::bootstrap`]):
//!
//! - the fleet's from its intervals, each run's taken independently: every
//!   interval holds the same flows, so what varies between them is time,
//!   the noise a change must stand out of;
//! - a pool's or a host's from its flows, paired (the same flow before and
//!   after), so that it is judged changed when its flows moved together: a
//!   host whose one peer went bad has one flow of its three moved, which
//!   is the peer's doing, not the host's. A host's flows are taken on each
//!   side apart, those it sends and those into it: a host dropping what it
//!   receives moves every flow into it and none of its own.
//!
//! The verdict is better or worse only when the interval leaves out zero
//! *and* the change clears a floor (1% of a rate, 0.1 points of loss, 25%
//! of an RTT): two runs on one fabric differ that much from run to run even
//! when nothing changed (a reference measured an hour apart is not a bar),
//! and the spread within one run cannot see that. A figure over a single
//! unit a side has no spread and no verdict: the line says what it had and,
//! for the fleet's intervals, how long a run would give it one.
//!
//! Runs of different shapes (hosts, flows, sizes, class, layering) are not
//! compared unless forced: their figures are not like for like.
//!
//! [`judge`] takes the figures, changes and verdicts from the documents;
//! [`mod@render`] writes them as text (the report page draws the same cells).

pub mod judge;
pub mod render;

pub use judge::{
    Comparison, FigureChange, Floors, FlowChange, GroupChange, LOSS_FLOOR_PTS, RATE_FLOOR_PCT,
    RTT_FLOOR_PCT, RunLabel, SCHEMA, Verdict, compare, shape_differences,
};
pub use render::render;
