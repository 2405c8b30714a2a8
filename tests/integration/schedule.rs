//! The layer schedule an agent follows: (matrix, wall-clock time) -> layer and flows.

use matrix_orchestrator::matrix::Matrix;
use matrix_orchestrator::matrix::schedule::Schedule;

const LAYERED: &str = "\
# tx_size=64 rx_size=64 port=5300
# peers=3 seed=5 layers=4 dwell=30
src\\dst,h1,h2,h3,h4,h5,h6,h7,h8,h9,h10,h11
h1,,,,,,,1000,1000,,1000,
h2,1000,,,,,,,1000,,,1000
h3,,1000,,,,1000,,,,,1000
h4,,1000,1000,,,1000,,,,,
h5,,,1000,1000,,1000,,,,,
h6,1000,1000,,,,,,,,,1000
h7,,,,1000,1000,,,,1000,,
h8,,,,,,,1000,,1000,1000,
h9,,,1000,1000,1000,,,,,,
h10,,,,,1000,,1000,,1000,,
h11,1000,,,,,,,1000,,1000,
";

fn layered() -> Matrix {
    Matrix::parse(LAYERED.as_bytes(), "layered.csv").unwrap()
}

#[test]
fn the_grid_is_layer_zero_of_its_seed() {
    // This grid is the one the original writes for h1..h11, K=3, seed 5.
    let m = layered();
    m.check_layer_zero("layered.csv").unwrap();
    let s = Schedule::new(&m);
    for (src, row) in m.rows() {
        assert_eq!(s.flows_in_layer(src, 0), row);
    }
}

#[test]
fn layer_and_flows_follow_the_wall_clock() {
    let m = layered();
    let s = Schedule::new(&m);
    assert_eq!(s.layer_count(), 4);
    assert_eq!(s.cycle_seconds(), Some(120.0));
    // t = 1_800_000_000 is 15_000_000 dwells: layer 0. Each 30 s moves one layer on.
    let t0 = 1_800_000_000.0;
    for step in 0..9 {
        let t = t0 + 30.0 * f64::from(step) + 1.0;
        let at = s.at(0, t);
        assert_eq!(at.layer, Some(step as usize % 4));
        assert_eq!(at.flows, s.flows_in_layer(0, step as usize % 4));
    }
    // h1 at position 7 of relabel [10,2,8,7,1,3,6,0,5,4,9]; layer 3 holds shift 6:
    // relabel[(7+6) % 11] = relabel[2] = 8, i.e. h9, at h1's row rate.
    let last = s.at(0, t0 + 90.0);
    assert_eq!(last.layer, Some(3));
    assert_eq!(last.flows.len(), 1);
    assert_eq!(last.flows[0].dst, 8);
    assert_eq!(last.flows[0].rate.pps(), Some(1000.0));
}

#[test]
fn one_cycle_gives_every_host_every_peer_once() {
    let m = layered();
    let s = Schedule::new(&m);
    for src in 0..11u32 {
        let mut peers: Vec<u32> = (0..4)
            .flat_map(|layer| s.flows_in_layer(src, layer))
            .map(|c| c.dst)
            .collect();
        peers.sort_unstable();
        let want: Vec<u32> = (0..11).filter(|&d| d != src).collect();
        assert_eq!(peers, want, "host {src}");
    }
}

#[test]
fn a_fixed_matrix_has_no_layers() {
    let m = Matrix::parse(b"src\\dst,a,b\r\na,,5\r\nb,5,\r\n", "m.csv").unwrap();
    let s = Schedule::new(&m);
    let at = s.at(1, 1_800_000_000.0);
    assert_eq!(at.layer, None);
    assert_eq!(at.flows, m.row(1));
    assert_eq!(s.cycle_seconds(), None);
}

#[test]
fn a_grid_edited_away_from_its_seed_is_refused_by_the_agent_check() {
    // Move h1's flow from h7 to h6: the header's seed no longer derives this grid.
    let edited = LAYERED.replace("h1,,,,,,,1000,1000,,1000,", "h1,,,,,,1000,,1000,,1000,");
    let m = Matrix::parse(edited.as_bytes(), "edited.csv").unwrap();
    let err = m.check_layer_zero("edited.csv").unwrap_err();
    assert_eq!(err.code(), 2);
    assert_eq!(
        err.message(),
        "edited.csv: the grid does not match its layers header (edited by hand?) -- regenerate with `mx gen --peers 3 --dwell 30 --seed 5`"
    );
}
