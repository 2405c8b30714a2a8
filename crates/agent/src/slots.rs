//! Which interval a packet is counted in.
//!
//! A request is counted in the interval it was sent in, by both hosts: the
//! sender by its own clock, the receiver by the interval tag the request
//! carries in its flags byte ([`super::wire`]). A reply is counted in the
//! interval of its request, which the sender finds from the `t_send` it
//! echoes. So a packet in flight across a tick belongs to one side of it, on
//! every host's books, and per interval `replies <= requests arrived <=
//! requests sent` holds exactly: no ratio passes 100%, none contradicts its
//! parts.
//!
//! That needs an interval's counts to stay open a little after its tick (the
//! hold, [`mx_report::hold_seconds`]): a worker keeps two sets of flow counts (the
//! interval in progress, and the one waiting out its hold) and four of
//! per-peer request counts (a peer whose clock runs ahead tags requests with
//! the next interval already). What comes after its interval was reported is
//! counted as late, in the interval in progress.

/// Sets of flow (tx) counts a worker keeps.
pub(crate) const TX_SLOTS: usize = 2;
/// Sets of per-peer request (rx) counts a worker keeps.
pub(crate) const RX_SLOTS: usize = 4;

/// The number of the interval ending at wall-clock `tick`.
pub(crate) fn interval_number(tick: f64, interval: f64) -> u64 {
    (tick / interval).round().max(0.0) as u64
}

pub(crate) fn tx_slot(number: u64) -> usize {
    (number % TX_SLOTS as u64) as usize
}

pub(crate) fn rx_slot(number: u64) -> usize {
    (number % RX_SLOTS as u64) as usize
}

/// Where a request goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RxSlot {
    Counted(usize),
    /// Its interval was already reported.
    Late,
}

/// The rx slot of a request tagged `tag` (`None`: the original's untagged
/// requests, counted in the interval they arrive in), while interval `current`
/// is in progress and `pending` waits out its hold.
pub(crate) fn rx_slot_of(tag: Option<u8>, current: u64, pending: Option<u64>) -> RxSlot {
    let Some(tag) = tag else {
        return RxSlot::Counted(rx_slot(current));
    };
    let modulus = super::wire::TAG_MASK + 1;
    match (u64::from(tag) + modulus - current % modulus) % modulus {
        0 => RxSlot::Counted(rx_slot(current)),
        1 => RxSlot::Counted(rx_slot(current + 1)),
        // The previous interval: counted while it waits out its hold.
        d if d == modulus - 1 => match pending {
            Some(p) if p + 1 == current => RxSlot::Counted(rx_slot(p)),
            _ => RxSlot::Late,
        },
        // Older: an interval already written. The request sat in a queue (a
        // full socket buffer of an agent short of CPU) for that long.
        d if d >= modulus / 2 => RxSlot::Late,
        // Further ahead: a peer whose clock runs more than an interval fast;
        // counted where it arrives.
        _ => RxSlot::Counted(rx_slot(current)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_land_in_their_senders_interval() {
        let tag = |n: u64| Some((n % 128) as u8);
        // Interval 1000 in progress, 999 waiting out its hold.
        assert_eq!(
            rx_slot_of(tag(1000), 1000, Some(999)),
            RxSlot::Counted(rx_slot(1000))
        );
        assert_eq!(
            rx_slot_of(tag(999), 1000, Some(999)),
            RxSlot::Counted(rx_slot(999))
        );
        // A peer ahead of us by a hair already sends in 1001.
        assert_eq!(
            rx_slot_of(tag(1001), 1000, Some(999)),
            RxSlot::Counted(rx_slot(1001))
        );
        // 999 already reported: a request of it is late.
        assert_eq!(rx_slot_of(tag(999), 1000, None), RxSlot::Late);
        // Across the tag's wrap (1023 % 128 = 127, 1024 % 128 = 0).
        assert_eq!(
            rx_slot_of(tag(1023), 1024, Some(1023)),
            RxSlot::Counted(rx_slot(1023))
        );
        assert_eq!(
            rx_slot_of(tag(1025), 1024, None),
            RxSlot::Counted(rx_slot(1025))
        );
        // Untagged (the original's) and far-ahead tags count where they arrive.
        assert_eq!(
            rx_slot_of(None, 1000, Some(999)),
            RxSlot::Counted(rx_slot(1000))
        );
        assert_eq!(
            rx_slot_of(tag(1040), 1000, Some(999)),
            RxSlot::Counted(rx_slot(1000))
        );
        // Older ones sat in a queue past their interval: late.
        assert_eq!(rx_slot_of(tag(995), 1000, Some(999)), RxSlot::Late);
        assert_eq!(rx_slot_of(tag(940), 1000, Some(999)), RxSlot::Late);
        // Three slots in use at once never share one.
        let used = [rx_slot(999), rx_slot(1000), rx_slot(1001)];
        assert!(used[0] != used[1] && used[1] != used[2] && used[0] != used[2]);
        assert_ne!(tx_slot(999), tx_slot(1000));
    }

    #[test]
    fn interval_numbers_follow_the_tick_labels() {
        assert_eq!(interval_number(1_796_003_025.0, 5.0), 359_200_605);
        assert_eq!(interval_number(1_796_003_025.5, 0.5), 3_592_006_051);
    }
}
