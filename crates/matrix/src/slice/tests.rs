use super::*;
use crate::build::{Shape, generated};
use crate::schedule::Schedule;

fn matrix(text: &str) -> Matrix {
    Matrix::parse(text.as_bytes(), "m.csv").unwrap()
}

fn layered(n: usize, peers: u32, fill: bool) -> Matrix {
    generated(
        n,
        Shape::Layered {
            peers,
            seed: 11,
            dwell: 15.0,
            fill,
        },
    )
}

/// What an agent derives from the matrix for host `me`: its flows in every
/// layer, what every source sends it in every layer, its print and its
/// stamp's terms, the cells into it as written, and the run's settings.
fn what_me_runs(m: &Matrix, me: u32) -> String {
    let schedule = Schedule::new(m);
    let mut out = format!("{:?} {:?} {:?}\n", m.config, m.hosts(), m.pools());
    out += &crate::run_print::run_print(m, me);
    out += &format!(
        "\n{:?}\n",
        crate::run_print::traffic_terms(m, me, "stamp", |h| format!("{},{}", h.addr, h.port))
    );
    for layer in 0..schedule.layer_count() {
        out += &format!("layer {layer}: {:?}\n", schedule.flows_in_layer(me, layer));
        for src in 0..m.host_count() as u32 {
            let into: Vec<Cell> = schedule
                .layer_flows(src, layer)
                .filter(|c| c.dst == me)
                .collect();
            if !into.is_empty() {
                out += &format!("  from {src}: {into:?}\n");
            }
        }
    }
    for (src, row) in m.rows() {
        for cell in row.iter().filter(|c| c.dst == me) {
            out += &format!("written {src}->{me} {:?}\n", cell.rate);
        }
    }
    out
}

fn read_back(m: &Matrix, me: u32) -> Slice {
    let bytes = Slicer::new(m.clone()).slice(me);
    read(&bytes, "slice").unwrap_or_else(|e| panic!("{e}\n{}", String::from_utf8_lossy(&bytes)))
}

#[test]
fn each_hosts_slice_runs_what_the_whole_matrix_runs_for_it() {
    let cases = [
        generated(7, Shape::FullMesh),
        generated(9, Shape::KRegular { peers: 3, seed: 4 }),
        layered(10, 2, false),
        layered(11, 3, true),
        hand_edited(),
    ];
    for m in &cases {
        for me in 0..m.host_count() as u32 {
            let slice = read_back(m, me);
            assert_eq!(slice.me, Some(me));
            assert_eq!(what_me_runs(&slice.matrix, me), what_me_runs(m, me));
            // The agent's own check of a layered grid passes on a slice.
            slice.matrix.check_layer_zero("slice").unwrap();
        }
    }
}

/// A layered matrix from a pool of 5 to a pool of 3, both ways.
fn pool_to_pool() -> Matrix {
    let text = {
        let hosts = |p: &str, n: usize| -> Vec<crate::HostToken> {
            (0..n)
                .map(|i| {
                    crate::HostToken::parse(&format!("{p}{i}=198.19.{}.{}", p.len(), i + 1))
                        .unwrap()
                })
                .collect()
        };
        let m = crate::build::build_between(
            vec![("web".into(), hosts("w", 5)), ("db".into(), hosts("db", 3))],
            crate::pools::Between {
                senders: 0,
                receivers: 1,
                duplex: true,
            },
            Shape::Layered {
                peers: 1,
                seed: 3,
                dwell: 10.0,
                fill: false,
            },
            crate::build::Traffic {
                rate: Rate::per_second(500.0),
                tx_size: 64,
                rx_size: 64,
                port: 5300,
                disk: crate::DiskMode::Off,
                dscp: crate::Dscp::default(),
            },
        );
        m.to_bytes()
    };
    Matrix::parse(&text, "m.csv").unwrap()
}

#[test]
fn a_pool_to_pool_layered_slice_runs_what_the_whole_runs() {
    let m = pool_to_pool();
    assert!(m.config.rotation.is_some() && m.pools().between.is_some());
    for me in 0..m.host_count() as u32 {
        assert_eq!(
            what_me_runs(&read_back(&m, me).matrix, me),
            what_me_runs(&m, me)
        );
    }
}

#[test]
fn every_hosts_slice_of_a_layered_matrix_runs_what_the_whole_runs_for_each() {
    // Hand-edited: one row whose cells send at two rates is written whole.
    let mut edited = layered(12, 3, false);
    edited.rows[4][1].rate = Rate::per_second(250.0);
    let cases = [
        layered(10, 2, false),
        layered(11, 3, true),
        pool_to_pool(),
        edited,
    ];
    for m in &cases {
        let every = Slicer::new(m.clone()).every_host();
        let slice = read(&every, "slice")
            .unwrap_or_else(|e| panic!("{e}\n{}", String::from_utf8_lossy(&every)));
        assert_eq!(slice.me, None, "each agent finds itself in it");
        slice.matrix.check_layer_zero("slice").unwrap();
        for me in 0..m.host_count() as u32 {
            assert_eq!(what_me_runs(&slice.matrix, me), what_me_runs(m, me));
        }
    }
    // Only the edited row is written whole.
    let text = String::from_utf8(Slicer::new(cases[3].clone()).every_host()).unwrap();
    let rows: Vec<&str> = text.lines().filter(|l| l.starts_with("row ")).collect();
    assert_eq!(rows.len(), 1, "{text}");
    assert!(
        rows[0].starts_with("row 4 ") && rows[0].contains("=250"),
        "{text}"
    );
}

/// The hand-edited grid of the slice tests above: rates that differ cell
/// by cell, an unpaced cell, a host that neither sends nor is sent to, a
/// class and disks.
fn hand_edited() -> Matrix {
    matrix(
        "# tx_size=100 rx_size=900 port=6000 dscp=46 disk=replies\n\
         src\\dst,a=10.0.0.1,b=10.0.0.2:6001,c=10.0.0.3,d=10.0.0.4\n\
         a,,150.5,max,\nb,10,,20,\nc,1,,,\nd,,,,\n",
    )
}

#[test]
fn every_hosts_slice_of_a_grid_runs_what_the_whole_runs_for_each() {
    let cases = [
        generated(7, Shape::FullMesh),
        generated(9, Shape::KRegular { peers: 3, seed: 4 }),
        hand_edited(),
    ];
    for m in &cases {
        let every = Slicer::new(m.clone()).every_host();
        let slice = read(&every, "slice")
            .unwrap_or_else(|e| panic!("{e}\n{}", String::from_utf8_lossy(&every)));
        assert_eq!(slice.me, None, "each agent finds itself in it");
        for me in 0..m.host_count() as u32 {
            assert_eq!(what_me_runs(&slice.matrix, me), what_me_runs(m, me));
        }
    }
    // A full mesh's row is one word; the silent host d has none.
    let mesh = String::from_utf8(Slicer::new(cases[0].clone()).every_host()).unwrap();
    let rows: Vec<&str> = mesh.lines().filter(|l| l.starts_with("row ")).collect();
    assert_eq!(rows.len(), 7, "{mesh}");
    assert!(
        rows.iter()
            .all(|r| r.split(' ').nth(2).unwrap().starts_with("*=")),
        "{mesh}"
    );
    let edited = String::from_utf8(Slicer::new(cases[2].clone()).every_host()).unwrap();
    assert!(!edited.contains("row 3"), "{edited}");
}

#[test]
fn every_hosts_slice_of_a_10000_host_grid_is_its_cells_not_its_square() {
    let m = generated(10_000, Shape::KRegular { peers: 8, seed: 7 });
    let whole = m.to_bytes().len();
    let every = Slicer::new(m.clone()).every_host();
    eprintln!("whole {whole} bytes, every host's slice {}", every.len());
    assert!(
        whole > 50 * every.len(),
        "whole {whole}, every host's {}",
        every.len()
    );
    let slice = read(&every, "s").unwrap();
    assert!(
        slice.matrix.rows == m.rows,
        "every row read back as written"
    );
}

#[test]
fn a_row_to_every_host_and_more_is_refused() {
    for (row, says) in [
        ("row 1 *=1000 2=5", "sends to every host, and more"),
        ("row 1 *=fast", "is not a rate"),
    ] {
        let mut text =
            String::from_utf8(Slicer::new(generated(3, Shape::FullMesh)).every_host()).unwrap();
        let at = text.find("row 1 ").unwrap();
        let end = at + text[at..].find('\n').unwrap();
        text.replace_range(at..end, row);
        // Sealed again, so that only the row is wrong.
        let body_end = text.rfind("end lines=").unwrap();
        let mut body = text.as_bytes()[..body_end].to_vec();
        seal(&mut body);
        let refused = read(&body, "s").err().expect("refused").to_string();
        assert!(refused.contains(says), "{row}: {refused}");
    }
}

#[test]
fn every_hosts_slice_of_10000_hosts_is_its_host_list_and_a_line() {
    let m = layered(10_000, 8, false);
    let whole = m.to_bytes().len();
    let every = Slicer::new(m).every_host();
    assert!(every.len() <= 400_000, "{} bytes", every.len());
    assert!(
        whole > 100 * every.len(),
        "whole {whole}, every host's {}",
        every.len()
    );
    assert_eq!(read(&every, "s").unwrap().me, None);
}

#[test]
fn a_10000_host_layered_matrix_gives_slices_of_at_most_400_kb() {
    let m = layered(10_000, 8, false);
    let whole = m.to_bytes().len();
    let slicer = Slicer::new(m.clone());
    let mut largest = 0;
    // Every host's slice holds the same parts (the head, the rates, its row
    // of 8 and the 8 cells into it); their sizes differ by the digits of
    // the indices. Every 97th host, and the last.
    for me in (0..10_000u32).step_by(97).chain([9_999]) {
        let slice = slicer.slice(me);
        largest = largest.max(slice.len());
        if me == 9_999 {
            assert_eq!(read(&slice, "s").unwrap().me, Some(me));
        }
    }
    assert!(largest <= 400_000, "{largest} bytes");
    assert!(whole > 100 * largest, "whole {whole}, slice {largest}");
}

#[test]
fn a_full_mesh_slice_grows_with_the_fleet_not_its_square() {
    let size = |n: usize| Slicer::new(generated(n, Shape::FullMesh)).slice(0).len();
    let (small, large) = (size(200), size(2_000));
    // Ten times the hosts: about ten times the slice (a matrix: a hundred).
    assert!(large < 11 * small, "{small} -> {large}");
}

#[test]
fn a_slice_cut_short_or_changed_is_refused_in_one_line() {
    let slice = Slicer::new(layered(10, 2, false)).slice(3);
    // A cell changed: the rate from host 3's row.
    refused_cut_short_or_changed(&slice, "=1000", "=2000");
}

#[test]
fn every_hosts_slice_cut_short_or_changed_is_refused_in_one_line() {
    let slice = Slicer::new(layered(10, 2, false)).every_host();
    // Every row's rate changed.
    refused_cut_short_or_changed(&slice, "rates 1000*", "rates 2000*");
}

/// `slice` refused in one line when cut short anywhere, when `from` is
/// changed to `to`, and when it is then sealed again with a new end line
/// (cut again from a file edited by hand): not the traffic it was cut as.
fn refused_cut_short_or_changed(slice: &[u8], from: &str, to: &str) {
    let refusal = |bytes: &[u8]| match read(bytes, "matrix.csv") {
        Ok(_) => panic!("read: {}", String::from_utf8_lossy(bytes)),
        Err(e) => e.to_string(),
    };
    for cut in [0, 10, slice.len() / 2, slice.len() - 1, slice.len() - 30] {
        let why = refusal(&slice[..cut]);
        assert!(
            why.starts_with("matrix.csv: cut short") || why.contains("changed since"),
            "{cut}: {why}"
        );
        assert!(!why.contains('\n'), "{why}");
    }
    let text = String::from_utf8(slice.to_vec()).unwrap();
    assert!(text.contains(from), "{text}");
    let changed = text.replacen(from, to, 1);
    assert!(refusal(changed.as_bytes()).contains("changed since it was cut"));
    let body = &changed[..changed.rfind("end lines=").unwrap()];
    let lines = body.matches('\n').count();
    let resealed = format!(
        "{body}end lines={lines} sha256={}\n",
        hex(&Sha256::digest(body.as_bytes()))
    );
    let why = refusal(resealed.as_bytes());
    assert!(why.contains("not the matrix it was cut from"), "{why}");
}

#[test]
fn a_slice_is_not_taken_for_a_matrix() {
    let slice = Slicer::new(generated(3, Shape::FullMesh)).slice(1);
    let why = Matrix::parse(&slice, "matrix.csv").unwrap_err().to_string();
    assert!(why.contains("one host's slice of a matrix"), "{why}");
    assert!(is_slice(&slice) && !is_slice(b"# mx matrix v1\n"));
}
