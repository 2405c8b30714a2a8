//! What an agent runs, decided once at startup and shared by its workers:
//! who it is, where its peers are, which flows each worker holds, and how
//! much each source is answered (the one part written to, by atomics).

use std::net::{IpAddr, SocketAddr};

use super::budget::Sources;
use super::udp::Buffers;
use mx_matrix::Matrix;
use mx_matrix::schedule::Schedule;

/// One client socket's share of a flow: stream `stream` of the flow to `peer`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct FlowSpec {
    pub peer: u32,
    pub stream: u16,
    /// This stream's share of the pair's rate; `None` = unpaced.
    pub rate: Option<f64>,
}

/// Everything the workers need, immutable for the agent's life.
pub struct AgentPlan {
    pub matrix: Matrix,
    /// This host's matrix index: the `src index` its requests and replies carry.
    pub me: u32,
    pub streams: u16,
    pub workers: usize,
    /// Resolved address of every matrix host (`None` when it did not resolve).
    pub peer_addrs: Vec<Option<SocketAddr>>,
    /// Source addresses whose requests are answered (the matrix hosts'),
    /// each as far as its budget goes. Its budgets are the one part of the
    /// plan the workers write to (atomics, shared: one source's streams land
    /// on several workers).
    pub sources: Sources,
    /// Address client sockets bind to (this host's matrix or --bind address).
    pub local_ip: Option<IpAddr>,
    /// Where the responders listen (the family of this host's address).
    pub listen: SocketAddr,
    /// Socket buffers of the responders and of the flow sockets.
    pub responder_buffers: Buffers,
    pub client_buffers: Buffers,
    /// Report interval in seconds.
    pub interval: f64,
    /// `--busy-poll`: workers spin over their sockets instead of sleeping.
    pub busy_poll: bool,
    /// Runs of datagrams go as GSO super-datagrams and are read with GRO: the
    /// kernel has both and `--no-gso` was not given.
    pub gso: bool,
    /// Disks in the round trip: the data file, and the I/O each packet asks
    /// of this host (`None` without `disk=`, or when every payload is
    /// header-only).
    pub disk: Option<crate::disk::DiskPlan>,
}

impl AgentPlan {
    pub fn schedule(&self) -> Schedule<'_> {
        Schedule::new(&self.matrix)
    }

    /// Descriptors its workers' disk threads hold
    /// ([`crate::limits::disk_handles`]); 0 without a disk.
    pub(crate) fn disk_handles(&self) -> u64 {
        self.disk
            .as_ref()
            .map_or(0, |d| crate::limits::disk_handles(self.workers, d.depth))
    }

    /// The flow specs of worker `worker` in `layer` (`None` for a fixed matrix):
    /// each pair split into `streams` sockets at rate/streams, the specs dealt
    /// round-robin so one pair's streams land on different workers.
    pub(crate) fn flows_for(&self, worker: usize, layer: Option<usize>) -> Vec<FlowSpec> {
        let schedule = self.schedule();
        let cells = match layer {
            None => self.matrix.row(self.me).to_vec(),
            Some(layer) => schedule.flows_in_layer(self.me, layer),
        };
        let mut specs = Vec::new();
        let mut i = 0;
        for cell in cells {
            for stream in 0..self.streams {
                if i % self.workers == worker {
                    specs.push(FlowSpec {
                        peer: cell.dst,
                        stream,
                        rate: cell.rate.pps().map(|pps| pps / f64::from(self.streams)),
                    });
                }
                i += 1;
            }
        }
        specs
    }

    /// Flow sockets this host holds in its busiest layer (all of them, fixed).
    pub(crate) fn flow_sockets(&self) -> usize {
        let schedule = self.schedule();
        let per_layer = (0..schedule.layer_count())
            .map(|l| schedule.layer_flows(self.me, l).count())
            .max()
            .unwrap_or(0);
        per_layer * usize::from(self.streams)
    }
}
