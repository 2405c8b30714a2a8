//! The summary written out, from the numbers of [`super::analysis`] (read
//! here, never the reverse): [`text`] is what `mx summarize` prints,
//! [`grids`] the N x N CSVs, [`page`] the HTML page of `mx report`;
//! [`findings`] writes WHAT TO DO NEXT for all three (and `--json`), and
//! [`words`] the small words they share.

pub mod findings;
pub mod grids;
pub mod page;
pub mod text;
pub mod words;
