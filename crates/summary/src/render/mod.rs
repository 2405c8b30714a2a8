//! The summary written out, from the numbers of [`super::analysis`] (read
//! here, never the reverse): [`text`] is what `mx summarize` prints,
//! [`grids`] the N x N CSVs, [`page`] the HTML page of `mx report`.

pub mod grids;
pub mod page;
pub mod text;
