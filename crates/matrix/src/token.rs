//! Host tokens: `name[=addr[:port]]`, as written in servers.txt and the matrix header.
//!
//! - `10.0.0.5`            name = addr = `10.0.0.5`, the matrix's default port
//! - `10.0.0.5:5400`       name = addr = `10.0.0.5`, port 5400
//! - `web1=10.0.0.5:5400`  name `web1`, addr `10.0.0.5`, port 5400
//!
//! - `db=[2001:db8::10]:5400`  name `db`, IPv6 addr `2001:db8::10`, port 5400
//! - `[::1]:5400`          name = addr = `::1`, port 5400
//! - `2001:db8::10`        name = addr = `2001:db8::10`, the default port
//!
//! The port is the UDP port the host's agent listens on, never an ssh port.
//! Addresses are IPv4 or IPv6 literals, or names the controller resolves. An
//! address part is split at its last `:`, unless it is an IPv6 literal: in
//! brackets when a port follows (`[2001:db8::10]:5400`), bare when none does.
//! The address is kept without its brackets.

use std::fmt;

/// A parsed host token. `token` keeps the text as given, so a matrix written back
/// carries the user's tokens verbatim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostToken {
    pub token: String,
    pub name: String,
    pub addr: String,
    /// The UDP port, when the token names one; else the matrix's `port=` applies.
    pub port: Option<u16>,
}

/// Why a token was refused; `Display` gives the original's wording.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenError {
    /// Empty name or address, or characters no host name or address has.
    Malformed(String),
    /// The part after the last `:` is not a port number 1..65535.
    BadPort(String),
    /// Brackets around something that is not an IPv6 address, or an IPv6
    /// address that is neither bare nor bracketed whole.
    BadIpv6(String),
}

impl fmt::Display for TokenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TokenError::Malformed(t) => {
                write!(f, "bad host token '{t}' (want name[=addr[:port]])")
            }
            TokenError::BadPort(t) => write!(
                f,
                "bad port in host token '{t}' (want name[=addr[:port]] with a port from 1 to 65535)"
            ),
            TokenError::BadIpv6(t) => write!(
                f,
                "bad IPv6 address in host token '{t}' (want name=[2001:db8::10]:port, the address in brackets when a port follows)"
            ),
        }
    }
}

impl HostToken {
    /// Parses one token; surrounding whitespace is ignored.
    pub fn parse(text: &str) -> Result<HostToken, TokenError> {
        let token = text.trim();
        if token.is_empty() {
            return Err(TokenError::Malformed(token.to_string()));
        }
        let (name, address_part) = match token.split_once('=') {
            Some((name, rest)) => (name.trim(), rest.trim()),
            None => ("", token),
        };
        let (addr, port) = split_address(address_part, token)?;
        // A bare token names the host by its address, without the port.
        let name = if token.contains('=') { name } else { addr };
        // A comma, quote or blank inside a name or address is a paste error that
        // would make the matrix header ambiguous: refuse it rather than guess.
        let stray = |c: char| c == ',' || c == '"' || c == '=' || c.is_whitespace();
        if name.is_empty() || addr.is_empty() || name.contains(stray) || addr.contains(stray) {
            return Err(TokenError::Malformed(token.to_string()));
        }
        Ok(HostToken {
            token: token.to_string(),
            name: name.to_string(),
            addr: addr.to_string(),
            port,
        })
    }
}

/// An address part's address and port: `[v6]:port`, `[v6]`, a bare IPv6
/// literal (no port), else split at the last `:`.
fn split_address<'a>(part: &'a str, token: &str) -> Result<(&'a str, Option<u16>), TokenError> {
    let bad_port = || TokenError::BadPort(token.to_string());
    if let Some(inner) = part.strip_prefix('[') {
        let bad = || TokenError::BadIpv6(token.to_string());
        let (addr, rest) = inner.split_once(']').ok_or_else(bad)?;
        let addr = addr.trim();
        addr.parse::<std::net::Ipv6Addr>().map_err(|_| bad())?;
        let port = match rest.trim() {
            "" => None,
            rest => {
                let port = rest.strip_prefix(':').ok_or_else(bad)?;
                Some(parse_port(port).ok_or_else(bad_port)?)
            }
        };
        return Ok((addr, port));
    }
    if part.matches(':').count() >= 2 {
        // Two colons or more: an IPv6 address, which takes no port unbracketed.
        part.parse::<std::net::Ipv6Addr>()
            .map_err(|_| TokenError::BadIpv6(token.to_string()))?;
        return Ok((part, None));
    }
    Ok(match part.rsplit_once(':') {
        Some((addr, port)) => (addr.trim(), Some(parse_port(port).ok_or_else(bad_port)?)),
        None => (part, None),
    })
}

fn parse_port(text: &str) -> Option<u16> {
    match text.trim().parse::<u32>() {
        Ok(p) if (1..=65535).contains(&p) => Some(p as u16),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> (String, String, Option<u16>) {
        let t = HostToken::parse(text).unwrap();
        (t.name, t.addr, t.port)
    }

    #[test]
    fn the_three_forms() {
        assert_eq!(
            parsed("10.0.0.5"),
            ("10.0.0.5".into(), "10.0.0.5".into(), None)
        );
        assert_eq!(
            parsed("10.0.0.5:5400"),
            ("10.0.0.5".into(), "10.0.0.5".into(), Some(5400))
        );
        assert_eq!(
            parsed("hostA=10.0.0.10:5399"),
            ("hostA".into(), "10.0.0.10".into(), Some(5399))
        );
        assert_eq!(
            parsed("web1=db.example"),
            ("web1".into(), "db.example".into(), None)
        );
        assert_eq!(
            parsed("  spaced = 10.0.0.1 "),
            ("spaced".into(), "10.0.0.1".into(), None)
        );
    }

    #[test]
    fn ipv6_addresses_in_brackets_or_bare_without_a_port() {
        let v6 = |name: &str, addr: &str, port| (name.to_string(), addr.to_string(), port);
        assert_eq!(
            parsed("db=[2001:db8::10]:5300"),
            v6("db", "2001:db8::10", Some(5300))
        );
        assert_eq!(parsed("db=[2001:db8::10]"), v6("db", "2001:db8::10", None));
        assert_eq!(
            parsed("db = [ fd00::1 ] : 99"),
            v6("db", "fd00::1", Some(99))
        );
        // A bare token is named by its address, without brackets or port.
        assert_eq!(parsed("[::1]:5300"), v6("::1", "::1", Some(5300)));
        assert_eq!(parsed("[::1]"), v6("::1", "::1", None));
        assert_eq!(
            parsed("2001:db8::10"),
            v6("2001:db8::10", "2001:db8::10", None)
        );
        assert_eq!(parsed("db=fd00:18:1::2"), v6("db", "fd00:18:1::2", None));
        // An IPv4-mapped address is still an IPv6 literal.
        assert_eq!(
            parsed("m=[::ffff:10.0.0.1]:7"),
            v6("m", "::ffff:10.0.0.1", Some(7))
        );
        assert_eq!(
            HostToken::parse("db=[2001:db8::10]:5300").unwrap().token,
            "db=[2001:db8::10]:5300"
        );
    }

    #[test]
    fn ipv6_refusals_say_how_to_write_one() {
        for bad in [
            "[2001:db8::10",
            "a=[2001:db8::10]5300",
            "a=[10.0.0.1]:5300",
            "a=[web1]",
            "a=[]",
            "a=2001:db8::zz",
            "a=2001:db8:::1",
            "a=fe80::1%eth0",
        ] {
            let err = HostToken::parse(bad).unwrap_err();
            assert_eq!(err, TokenError::BadIpv6(bad.to_string()), "{bad:?}");
            assert_eq!(
                err.to_string(),
                format!(
                    "bad IPv6 address in host token '{bad}' (want name=[2001:db8::10]:port, the address in brackets when a port follows)"
                )
            );
        }
        for bad in ["a=[::1]:0", "[::1]:http", "a=[::1]:70000", "[::1]:"] {
            assert_eq!(
                HostToken::parse(bad).unwrap_err(),
                TokenError::BadPort(bad.to_string())
            );
        }
    }

    #[test]
    fn the_token_text_is_kept_verbatim() {
        assert_eq!(
            HostToken::parse(" a=1.2.3.4:99 ").unwrap().token,
            "a=1.2.3.4:99"
        );
    }

    #[test]
    fn refusals_name_the_token() {
        for bad in ["", "=10.0.0.1", "a=", "a=:5300", "a b", "a,b", "a=b=c"] {
            let err = HostToken::parse(bad).unwrap_err();
            assert!(
                matches!(err, TokenError::Malformed(_)),
                "{bad:?} gave {err:?}"
            );
        }
        for bad in [
            "10.0.0.1:",
            "10.0.0.1:http",
            "a=10.0.0.1:0",
            "a=10.0.0.1:70000",
        ] {
            let err = HostToken::parse(bad).unwrap_err();
            assert_eq!(err, TokenError::BadPort(bad.to_string()));
            assert!(err.to_string().contains(bad));
        }
    }
}
