//! Matrices edited by hand load: comments anywhere, extra whitespace, CRLF line
//! ends, quoted fields, a cell changed, a row repeated.

use matrix_orchestrator::matrix::{Matrix, Rate};

fn rates(m: &Matrix, src: &str) -> Vec<(String, Option<f64>)> {
    let src = m.index_of(src).unwrap();
    m.row(src)
        .iter()
        .map(|c| (m.hosts()[c.dst as usize].name.clone(), c.rate.pps()))
        .collect()
}

#[test]
fn a_hand_edited_file_loads() {
    let text = "\r\n\
        # mx matrix v1 -- rows send, columns receive, cells are packets/sec\r\n\
        #   tx_size=128    rx_size=8192 port=5300\r\n\
        \r\n\
        src\\dst , web=10.0.0.1 ,\"db=10.0.0.2:5400\", 10.0.0.3\r\n\
          # a comment between rows, indented\r\n\
        web,  , 20000 ,  MAX \r\n\
        db=10.0.0.2, 150.5,,0\r\n\
        ## port=5301 set late still counts: later keys win\r\n\
        10.0.0.3,1e3,,\r\n\
        \r\n";
    let m = Matrix::parse(text.as_bytes(), "edited.csv").unwrap();
    assert_eq!(m.config.tx_size, 128);
    assert_eq!(m.config.rx_size, 8192);
    assert_eq!(m.config.port, 5301);
    let hosts: Vec<(&str, &str, u16)> = m
        .hosts()
        .iter()
        .map(|h| (h.name.as_str(), h.addr.as_str(), h.port))
        .collect();
    assert_eq!(
        hosts,
        [
            ("web", "10.0.0.1", 5301),
            ("db", "10.0.0.2", 5400),
            ("10.0.0.3", "10.0.0.3", 5301)
        ]
    );
    assert_eq!(
        rates(&m, "web"),
        [("db".into(), Some(20000.0)), ("10.0.0.3".into(), None)]
    );
    assert!(m.row(0)[1].rate.is_unpaced());
    assert_eq!(rates(&m, "db"), [("web".into(), Some(150.5))]);
    assert_eq!(rates(&m, "10.0.0.3"), [("web".into(), Some(1000.0))]);
    assert_eq!(m.flow_count(), 4);
}

#[test]
fn the_diagonal_and_cells_past_the_header_are_ignored() {
    let m = Matrix::parse(b"src\\dst,a,b\na,99,5,7,8\nb,1,2\n", "m.csv").unwrap();
    assert_eq!(rates(&m, "a"), [("b".into(), Some(5.0))]);
    assert_eq!(rates(&m, "b"), [("a".into(), Some(1.0))]);
}

#[test]
fn a_repeated_row_merges_into_the_first() {
    let m = Matrix::parse(b"src\\dst,a,b,c\na,,5,\nb,1,,\na,,,9\na,,6,\n", "m.csv").unwrap();
    assert_eq!(
        rates(&m, "a"),
        [("b".into(), Some(6.0)), ("c".into(), Some(9.0))]
    );
}

#[test]
fn a_hand_changed_cell_survives_a_rewrite() {
    let m = Matrix::parse(b"src\\dst,a,b\r\na,,20000\r\nb,150.5,\r\n", "m.csv").unwrap();
    let text = String::from_utf8(m.to_bytes()).unwrap();
    assert!(
        text.ends_with("src\\dst,a,b\r\na,,20000\r\nb,150.5,\r\n"),
        "{text}"
    );
    assert_eq!(Matrix::parse(text.as_bytes(), "again.csv").unwrap(), m);
    assert_eq!(m.row_rate(1), Some(Rate::per_second(150.5)));
}
