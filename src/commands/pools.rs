//! `--pool NAME=FILE`, `--between A B`, `--duplex` (gen and hints): the pools
//! read and checked, and which shape they ask for.

use crate::cli::PoolArgs;
use crate::error::{Error, Result};
use crate::matrix::pools::Between;
use crate::matrix::servers::read_pool;
use crate::matrix::{Host, HostToken, MAX_HOSTS, shared_endpoint, shared_endpoint_message};

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
    /// Reads the pools the flags name and checks them: names unique, the
    /// `--between` pools declared, no host in both pools, no two hosts at one
    /// address and port (under `port` when a token names none).
    pub fn read(args: &PoolArgs, port: u16) -> Result<Selection> {
        if args.pools.is_empty() {
            if args.between.is_some() || args.duplex {
                return Err(Error::refused(
                    "--between and --duplex need pools: --pool NAME=FILE for each",
                ));
            }
            return Ok(Selection::Servers);
        }
        for (i, (name, _)) in args.pools.iter().enumerate() {
            if args.pools[..i].iter().any(|(n, _)| n == name) {
                return Err(Error::refused(format!(
                    "--pool {name} is given twice: each pool has one name"
                )));
            }
        }
        let names: Vec<&str> = match (&args.between, args.pools.len()) {
            (Some(pair), _) => pair.iter().map(String::as_str).collect(),
            (None, 1) => vec![&args.pools[0].0; 2],
            (None, 2) => vec![&args.pools[0].0, &args.pools[1].0],
            (None, n) => {
                return Err(Error::refused(format!(
                    "{n} pools: say which two to test with --between FROM TO"
                )));
            }
        };
        let find = |name: &str| {
            args.pools.iter().find(|(n, _)| n == name).ok_or_else(|| {
                let known: Vec<&str> = args.pools.iter().map(|(n, _)| n.as_str()).collect();
                Error::refused(format!(
                    "--between {name}: no such pool (pools: {})",
                    known.join(", ")
                ))
            })
        };
        let (from, to) = (find(names[0])?, find(names[1])?);
        if from.0 == to.0 {
            if args.duplex {
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
                duplex: args.duplex,
            },
        })
    }
}

/// Refuses two hosts at one address and port: one agent would answer for both.
fn placed(lists: &[(&std::path::PathBuf, &Vec<HostToken>)], port: u16) -> Result<()> {
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
