//! How the agent crosses to a host that lacks it: packed, and unpacked there
//! as it arrives. zstd where this machine and the host both have it (a 6 MB
//! agent crosses as 2.6 MB, and unpacks in a quarter of gzip's time), else
//! gzip (every Linux with ssh has it: 2.8 MB), else as it is.
//!
//! On a fleet the copy is most of what a fresh start costs beyond the login:
//! each host's sshd takes in the bytes and its CPU unpacks them, and at
//! 10,000 hosts this machine sends the agent 10,000 times. Either tool checks
//! what it unpacks (gzip: a CRC-32; zstd: the frame's XXH64 of its content),
//! beside the copy's own check of what crossed.

/// A way of packing the agent, in the order a host is offered them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Packing {
    Zstd,
    Gzip,
}

impl Packing {
    /// Every packing, the one preferred first.
    pub const ALL: [Packing; 2] = [Packing::Zstd, Packing::Gzip];

    /// The tool that unpacks it on a host (and packs it here, for zstd).
    pub fn tool(self) -> &'static str {
        match self {
            Packing::Zstd => "zstd",
            Packing::Gzip => "gzip",
        }
    }

    /// The suffix of a file sent packed this way: the host unpacks it under
    /// its name without it.
    pub fn suffix(self) -> &'static str {
        match self {
            Packing::Zstd => ".zst",
            Packing::Gzip => ".gz",
        }
    }

    /// What a host's ready step says when it can unpack this way:
    /// `unpack=zstd`.
    pub fn ready_line(self) -> String {
        format!("unpack={}", self.tool())
    }

    /// The packing of a file by its `name`, and the name it is unpacked
    /// under.
    pub fn of_name(name: &str) -> Option<(Packing, &str)> {
        Packing::ALL
            .into_iter()
            .find_map(|p| Some((p, name.strip_suffix(p.suffix())?)))
    }

    /// The packings a host can unpack, from its ready step's words.
    pub fn on_host(ready: &str) -> Vec<Packing> {
        Packing::ALL
            .into_iter()
            .filter(|p| ready.lines().any(|l| l == p.ready_line()))
            .collect()
    }
}

/// The shell words that say which packings this host can unpack, one
/// [`Packing::ready_line`] each (nothing where it has neither tool: the
/// agent is then copied as it is).
pub fn offered() -> String {
    let tools: Vec<&str> = Packing::ALL.iter().map(|p| p.tool()).collect();
    format!(
        "for mx_t in {}; do command -v $mx_t >/dev/null 2>&1 && echo unpack=$mx_t; done; true",
        tools.join(" ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_is_offered_what_its_ready_step_said_it_has_zstd_first() {
        assert_eq!(
            Packing::on_host("ready\nunpack=zstd\nunpack=gzip"),
            [Packing::Zstd, Packing::Gzip]
        );
        assert_eq!(Packing::on_host("ready\nunpack=gzip"), [Packing::Gzip]);
        assert!(Packing::on_host("ready\nsha256=ab").is_empty());
        assert_eq!(Packing::of_name("mx.zst"), Some((Packing::Zstd, "mx")));
        assert_eq!(Packing::of_name("mx.gz"), Some((Packing::Gzip, "mx")));
        assert_eq!(Packing::of_name("matrix.csv"), None);
    }

    #[test]
    fn the_offer_names_the_tools_this_shell_finds() {
        let bin = tempfile::tempdir().unwrap();
        let gzip = bin.path().join("gzip");
        std::fs::write(&gzip, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&gzip, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let said = std::process::Command::new("/bin/sh")
            .args(["-c", &offered()])
            .env("PATH", bin.path())
            .output()
            .unwrap();
        assert!(said.status.success());
        assert_eq!(String::from_utf8_lossy(&said.stdout), "unpack=gzip\n");
    }
}
