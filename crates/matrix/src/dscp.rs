//! The traffic class of a run (`dscp=` in the matrix, `mx gen --dscp`): the
//! DiffServ code point (RFC 2474) every request and reply is marked with, the
//! six high bits of the IPv4 TOS byte and of the IPv6 traffic class. The two
//! low bits (ECN, RFC 3168) stay zero: they belong to the network.

/// A DiffServ code point, 0..=63. 0 is the default class (best effort), and a
/// matrix without `dscp=` runs in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Dscp(u8);

/// The code points with a common name: class selectors (RFC 2474), assured
/// forwarding (RFC 2597) and expedited forwarding (RFC 3246). Names are
/// accepted in any case; the file always holds the number.
const NAMES: [(&str, u8); 21] = [
    ("CS0", 0),
    ("CS1", 8),
    ("AF11", 10),
    ("AF12", 12),
    ("AF13", 14),
    ("CS2", 16),
    ("AF21", 18),
    ("AF22", 20),
    ("AF23", 22),
    ("CS3", 24),
    ("AF31", 26),
    ("AF32", 28),
    ("AF33", 30),
    ("CS4", 32),
    ("AF41", 34),
    ("AF42", 36),
    ("AF43", 38),
    ("CS5", 40),
    ("EF", 46),
    ("CS6", 48),
    ("CS7", 56),
];

/// What a refusal lists as valid: the range and the names.
pub(crate) const VALID: &str = "0..63 or a name: EF, AF11..AF43, CS0..CS7";

impl Dscp {
    /// The largest code point: six bits.
    pub const MAX: u8 = 63;

    /// A code point from a `dscp=` value or `--dscp`: a number 0..=63 or one
    /// of the names (trimmed, any case). `Err` says what is wanted (after
    /// "want"), for the refusal.
    pub fn parse(text: &str) -> Result<Dscp, String> {
        let t = text.trim();
        if let Some(&(_, value)) = NAMES.iter().find(|(name, _)| name.eq_ignore_ascii_case(t)) {
            return Ok(Dscp(value));
        }
        match t.parse::<i64>() {
            Ok(n) if (0..=i64::from(Self::MAX)).contains(&n) => Ok(Dscp(n as u8)),
            // A whole TOS byte given where its six high bits were meant.
            Ok(n) if (64..=255).contains(&n) && n % 4 == 0 => Err(format!(
                "{VALID}; {n} looks like a whole TOS byte, whose DSCP is {}",
                n >> 2
            )),
            _ => Err(VALID.to_string()),
        }
    }

    pub fn value(self) -> u8 {
        self.0
    }

    /// The byte the kernel is given (IP_TOS / IPV6_TCLASS): the code point in
    /// the six high bits, ECN zero.
    pub fn tos(self) -> u8 {
        self.0 << 2
    }

    /// The default class (best effort): nothing is marked, nothing written.
    pub fn is_default(self) -> bool {
        self.0 == 0
    }

    /// The common name of the code point, if it has one (`EF`).
    pub fn name(self) -> Option<&'static str> {
        NAMES.iter().find(|&&(_, v)| v == self.0).map(|&(n, _)| n)
    }

    /// `DSCP 46 (EF)`, or `DSCP 5` for a code point without a name: how every
    /// output names the class.
    pub fn label(self) -> String {
        match self.name() {
            Some(name) => format!("DSCP {} ({name})", self.0),
            None => format!("DSCP {}", self.0),
        }
    }

    /// `dscp=N` after `lead`, as the matrix header, the agent's banner and
    /// the running line append it; empty for the default class, which none
    /// of them mention.
    pub fn setting(self, lead: &str) -> String {
        if self.is_default() {
            String::new()
        } else {
            format!("{lead}dscp={}", self.0)
        }
    }

    /// What the class means, in the words the matrix comment, `gen` and
    /// `check` use. (No `key=value` in it: a matrix comment would read that
    /// as a setting.)
    pub fn sentence(self) -> String {
        format!(
            "every request and reply is marked {}: TOS / traffic class byte 0x{:02x}",
            self.label(),
            self.tos()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_names_in_any_case() {
        let value = |t: &str| Dscp::parse(t).map(Dscp::value);
        assert_eq!(value("46"), Ok(46));
        assert_eq!(value(" ef "), Ok(46));
        assert_eq!(value("AF41"), Ok(34));
        assert_eq!(value("af11"), Ok(10));
        assert_eq!(value("cs7"), Ok(56));
        assert_eq!(value("CS0"), Ok(0));
        assert_eq!(value("0"), Ok(0));
        assert_eq!(value("63"), Ok(63));
        for bad in ["65", "256", "-1", "AF44", "EF1", "", "4.5", "0x2e"] {
            assert_eq!(value(bad), Err(VALID.to_string()), "{bad:?}");
        }
        assert_eq!(
            value("184"),
            Err(format!(
                "{VALID}; 184 looks like a whole TOS byte, whose DSCP is 46"
            ))
        );
    }

    #[test]
    fn the_tos_byte_leaves_ecn_zero() {
        assert_eq!(Dscp(46).tos(), 0xb8);
        assert_eq!(Dscp(63).tos(), 0xfc);
        assert_eq!(Dscp(10).tos(), 0x28);
    }

    #[test]
    fn labels_name_the_class() {
        assert_eq!(Dscp(46).label(), "DSCP 46 (EF)");
        assert_eq!(Dscp(34).label(), "DSCP 34 (AF41)");
        assert_eq!(Dscp(5).label(), "DSCP 5");
        assert!(Dscp::default().is_default());
        assert_eq!(Dscp(46).setting(", "), ", dscp=46");
        assert_eq!(Dscp::default().setting(", "), "");
    }
}
