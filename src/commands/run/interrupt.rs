//! Ctrl-C while a run holds the fleet. The first ends every flow at once
//! and the run goes on to summarize what ran, exit status 130; a second
//! gives up waiting for the fleet and exits 130 there and then, saying what
//! may still be sending.
//!
//! The signal is read by a thread of its own (a signal-hook iterator), never
//! by a handler that could only set a flag: the second Ctrl-C must act even
//! while the command waits on the fleet.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use signal_hook::consts::SIGINT;
use signal_hook::iterator::Signals;

use crate::error::EXIT_INTERRUPTED;
use crate::units::wall_now;

/// Whether Ctrl-C came, and when.
#[derive(Clone)]
pub(crate) struct Interrupt {
    came: Arc<AtomicBool>,
    /// Wall time of the first Ctrl-C, as `f64` bits.
    at: Arc<AtomicU64>,
}

impl Interrupt {
    /// Starts watching for Ctrl-C. `hint` is the command that ends what a
    /// second Ctrl-C leaves running (`mx stop ...`).
    pub fn watch(hint: String) -> std::io::Result<Interrupt> {
        let interrupt = Interrupt {
            came: Arc::new(AtomicBool::new(false)),
            at: Arc::new(AtomicU64::new(0)),
        };
        let mut signals = Signals::new([SIGINT])?;
        let seen = interrupt.clone();
        std::thread::spawn(move || {
            for _ in signals.forever() {
                if seen.came.swap(true, Ordering::SeqCst) {
                    eprintln!(
                        "\n[mx] interrupted again -- not waiting for the fleet: an agent the end did not reach sends until its own end; `{hint}` ends them"
                    );
                    std::process::exit(i32::from(EXIT_INTERRUPTED));
                }
                seen.at.store(wall_now().to_bits(), Ordering::SeqCst);
            }
        });
        Ok(interrupt)
    }

    /// Whether Ctrl-C came.
    pub fn came(&self) -> bool {
        self.came.load(Ordering::SeqCst)
    }

    /// The flag itself, for a loop that waits on it.
    pub fn flag(&self) -> &AtomicBool {
        &self.came
    }

    /// Wall time of the first Ctrl-C (`None` before it).
    pub fn at(&self) -> Option<f64> {
        let bits = self.at.load(Ordering::SeqCst);
        (self.came() && bits != 0).then(|| f64::from_bits(bits))
    }
}
