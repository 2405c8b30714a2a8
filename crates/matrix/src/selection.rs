//! Which hosts a matrix is drawn from: the server list, the mesh inside one
//! pool, or pool to pool. The pools the user names (`--pool NAME=FILE`,
//! `--between A B`, `--duplex` of gen and hints) are read and checked here,
//! from plain values; the flags themselves are the command line's.

use std::path::PathBuf;

use super::pools::Between;
use super::servers::read_pool;
use super::{Host, HostToken, MAX_HOSTS, shared_endpoint, shared_endpoint_message};
use mx_base::error::{Error, Result};

/// What the pool flags select.
pub enum Selection {
    /// No `--pool`: the server list, as before pools.
    Servers,
    /// `--between A A` (or one pool): the mesh inside pool `name`.
    Inside { name: String, hosts: Vec<HostToken> },
    /// Pool to pool: `pools[0]` sends, `pools[1]` answers (both send with duplex).
    Between {
        pools: Vec<(String, Vec<HostToken>)>,
        between: Between,
    },
}

impl Selection {
    /// Reads the pools named and checks them: names unique, the `between`
    /// pools declared, no host in both pools, no two hosts at one address and
    /// port (under `port` when a token names none). `pools` are the
    /// `--pool` (name, server list file) pairs in order, `between` the FROM
    /// and TO names, `duplex` whether both pools send.
    pub fn read(
        pools: &[(String, PathBuf)],
        between: Option<&[String]>,
        duplex: bool,
        port: u16,
    ) -> Result<Selection> {
        if pools.is_empty() {
            if between.is_some() || duplex {
                return Err(Error::refused(
                    "--between and --duplex need pools: --pool NAME=FILE for each",
                ));
            }
            return Ok(Selection::Servers);
        }
        for (i, (name, _)) in pools.iter().enumerate() {
            if pools[..i].iter().any(|(n, _)| n == name) {
                return Err(Error::refused(format!(
                    "--pool {name} is given twice: each pool has one name"
                )));
            }
        }
        let names: Vec<&str> = match (between, pools.len()) {
            (Some(pair), _) => pair.iter().map(String::as_str).collect(),
            (None, 1) => vec![&pools[0].0; 2],
            (None, 2) => vec![&pools[0].0, &pools[1].0],
            (None, n) => {
                return Err(Error::refused(format!(
                    "{n} pools: say which two to test with --between FROM TO"
                )));
            }
        };
        let find = |name: &str| {
            pools.iter().find(|(n, _)| n == name).ok_or_else(|| {
                let known: Vec<&str> = pools.iter().map(|(n, _)| n.as_str()).collect();
                Error::refused(format!(
                    "--between {name}: no such pool (pools: {})",
                    known.join(", ")
                ))
            })
        };
        let (from, to) = (find(names[0])?, find(names[1])?);
        if from.0 == to.0 {
            if duplex {
                return Err(Error::refused(format!(
                    "--duplex needs two pools: inside pool {} every host already sends and answers",
                    from.0
                )));
            }
            let hosts = read_pool(&from.1)?;
            if hosts.len() < 2 {
                return Err(Error::refused(format!(
                    "{}: pool {} has one server, and a mesh inside it needs at least 2",
                    from.1.display(),
                    from.0
                )));
            }
            placed(&[(&from.1, &hosts)], port)?;
            return Ok(Selection::Inside {
                name: from.0.clone(),
                hosts,
            });
        }
        let (a, b) = (read_pool(&from.1)?, read_pool(&to.1)?);
        if let Some(host) = a.iter().find(|h| b.iter().any(|o| o.name == h.name)) {
            return Err(Error::refused(format!(
                "host '{}' is in pool {} ({}) and in pool {} ({}): a host belongs to one pool",
                host.name,
                from.0,
                from.1.display(),
                to.0,
                to.1.display()
            )));
        }
        if a.len() + b.len() > MAX_HOSTS {
            return Err(Error::refused(format!(
                "{} hosts is more than the {MAX_HOSTS} the wire format can address",
                a.len() + b.len()
            )));
        }
        placed(&[(&from.1, &a), (&to.1, &b)], port)?;
        Ok(Selection::Between {
            pools: vec![(from.0.clone(), a), (to.0.clone(), b)],
            between: Between {
                senders: 0,
                receivers: 1,
                duplex,
            },
        })
    }
}

/// Refuses two hosts at one address and port: one agent would answer for both.
fn placed(lists: &[(&PathBuf, &Vec<HostToken>)], port: u16) -> Result<()> {
    let hosts: Vec<Host> = lists
        .iter()
        .flat_map(|(_, l)| l.iter().map(|t| Host::from_token(t.clone(), port)))
        .collect();
    if let Some((a, b)) = shared_endpoint(&hosts) {
        let files: Vec<String> = lists.iter().map(|(p, _)| p.display().to_string()).collect();
        return Err(Error::refused(format!(
            "{}: {}",
            files.join(", "),
            shared_endpoint_message(&hosts[a], &hosts[b])
        )));
    }
    Ok(())
}
