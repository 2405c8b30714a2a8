//! Host tokens: `name[=addr[:port]]`, as written in servers.txt and the matrix header.
//!
//! - `10.0.0.5`            name = addr = `10.0.0.5`, the matrix's default port
//! - `10.0.0.5:5400`       name = addr = `10.0.0.5`, port 5400
//! - `web1=10.0.0.5:5400`  name `web1`, addr `10.0.0.5`, port 5400
//!
//! The port is the UDP port the host's agent listens on, never an ssh port.
//! Addresses are IPv4 literals or names the controller resolves; an address part is
//! split at its last `:`, so IPv6 literals are not host tokens (mx is IPv4 only).

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
        let (addr, port) = match address_part.rsplit_once(':') {
            Some((addr, port)) => {
                let port =
                    parse_port(port).ok_or_else(|| TokenError::BadPort(token.to_string()))?;
                (addr.trim(), Some(port))
            }
            None => (address_part, None),
        };
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
