//! `mx check --json`: the check's figures as one document (schema
//! mx.check/1, described in docs/json.md).

use std::io::Write;

use super::{over_caps, unpaced_flows};
use crate::cli::CheckArgs;
use crate::error::{EXIT_PROBLEMS, Result};
use crate::matrix::load::{Datagram, MatrixLoad, Mtu, workers_needed};
use crate::matrix::{Host, Matrix};

/// `check --json`'s document (mx.check/1), in the text's order.
#[derive(serde::Serialize)]
struct CheckDoc {
    schema: &'static str,
    matrix: String,
    hosts_count: usize,
    flows: usize,
    request_bytes: u32,
    reply_bytes: u32,
    port: u16,
    dscp: Option<String>,
    /// The path MTU the packets and wire rates assume.
    mtu: u32,
    layered: Option<LayeredDoc>,
    unpaced_flows: usize,
    caps: CapsDoc,
    /// Null when nothing is paced (no load to weigh).
    fleet_offered_pps: Option<f64>,
    hosts: Vec<HostLoadDoc>,
    over_hosts: usize,
    /// Null: nothing to judge (no caps given, or nothing paced).
    admissible: Option<bool>,
    workers_needed: Option<u64>,
}

#[derive(serde::Serialize)]
struct LayeredDoc {
    layers: u32,
    peers: u32,
    dwell_s: f64,
}

#[derive(serde::Serialize)]
struct CapsDoc {
    nic_gbps: Option<f64>,
    nic_mpps: Option<f64>,
}

#[derive(serde::Serialize)]
struct HostLoadDoc {
    host: String,
    /// IP packets a request and a reply leave as over its IP version: 1, or
    /// their fragments.
    request_fragments: u32,
    reply_fragments: u32,
    /// Its paced load (unpaced flows have no rate); null when nothing is paced.
    /// Packets count fragments, in the busier direction.
    packets_pps: Option<f64>,
    out_wire_bps: Option<f64>,
    in_wire_bps: Option<f64>,
    unpaced: bool,
    /// How it exceeds the caps, one phrase per cap.
    over: Vec<String>,
    disk: Option<DiskLoadDoc>,
}

#[derive(serde::Serialize)]
struct DiskLoadDoc {
    read_iops: f64,
    read_bytes_per_s: f64,
    write_iops: f64,
    write_bytes_per_s: f64,
}

/// `check --json`: the same figures as one document; the exit code is the
/// text's (1 when a host is over a cap).
pub(super) fn json(
    args: &CheckArgs,
    matrix: &Matrix,
    (load, mtu): (&MatrixLoad, Mtu),
    out: &mut dyn Write,
) -> Result<u8> {
    let c = &matrix.config;
    let fragments = |payload, host: &Host| {
        Datagram {
            payload,
            ip: host.ip(),
            mtu,
        }
        .fragments()
    };
    let (unpaced, _) = unpaced_flows(matrix);
    let paced = load.fleet_pps > 0.0;
    let disk = c.disk.sentence().is_some();
    let hosts: Vec<HostLoadDoc> = matrix
        .hosts()
        .iter()
        .zip(&load.hosts)
        .map(|(host, h)| HostLoadDoc {
            host: host.name.clone(),
            request_fragments: fragments(c.tx_size, host),
            reply_fragments: fragments(c.rx_size, host),
            packets_pps: paced.then_some(h.packets),
            out_wire_bps: paced.then_some(h.out_wire),
            in_wire_bps: paced.then_some(h.in_wire),
            unpaced: h.unpaced,
            over: if paced {
                over_caps(args, h)
            } else {
                Vec::new()
            },
            disk: disk.then_some(DiskLoadDoc {
                read_iops: h.disk.read_iops,
                read_bytes_per_s: h.disk.read_bytes,
                write_iops: h.disk.write_iops,
                write_bytes_per_s: h.disk.write_bytes,
            }),
        })
        .collect();
    let over_hosts = hosts.iter().filter(|h| !h.over.is_empty()).count();
    let caps_given = args.nic_gbps.is_some() || args.nic_mpps.is_some();
    let busiest = load.hosts.iter().map(|h| h.out_pps).fold(0.0, f64::max);
    let doc = CheckDoc {
        schema: "mx.check/1",
        matrix: args.matrix.display().to_string(),
        hosts_count: matrix.host_count(),
        flows: matrix.flow_count(),
        request_bytes: c.tx_size,
        reply_bytes: c.rx_size,
        port: c.port,
        dscp: (!c.dscp.is_default()).then(|| c.dscp.label()),
        mtu: mtu.bytes(),
        layered: c.shuffle.zip(c.rotation).map(|(key, r)| LayeredDoc {
            layers: r.layers,
            peers: key.peers,
            dwell_s: r.dwell,
        }),
        unpaced_flows: unpaced,
        caps: CapsDoc {
            nic_gbps: args.nic_gbps,
            nic_mpps: args.nic_mpps,
        },
        fleet_offered_pps: paced.then_some(load.fleet_pps),
        hosts,
        over_hosts,
        admissible: (paced && caps_given).then_some(over_hosts == 0),
        workers_needed: paced.then(|| workers_needed(busiest)),
    };
    let mut text = serde_json::to_string_pretty(&doc).expect("a check document serializes");
    text.push('\n');
    out.write_all(text.as_bytes())?;
    Ok(if over_hosts > 0 { EXIT_PROBLEMS } else { 0 })
}
