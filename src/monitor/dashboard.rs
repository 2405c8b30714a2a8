//! The Grafana dashboard: the fleet's forward and return loss as sender x
//! receiver matrices, each host's loss into and out of it, RTT percentiles
//! and duplicates, every loss panel on the recorded series of
//! [`super::rules`] (the senders' own counts, as the alerts read them).

use serde_json::{Value, json};

use super::Settings;

/// A query of a panel: its PromQL and its legend.
struct Query {
    expr: String,
    legend: &'static str,
}

fn q(expr: impl Into<String>, legend: &'static str) -> Query {
    Query {
        expr: expr.into(),
        legend,
    }
}

const DATASOURCE: &str = "${datasource}";

fn targets(queries: &[Query], instant: bool) -> Value {
    Value::Array(
        queries
            .iter()
            .enumerate()
            .map(|(i, query)| {
                json!({
                    "datasource": {"type": "prometheus", "uid": DATASOURCE},
                    "expr": query.expr,
                    "legendFormat": query.legend,
                    "instant": instant,
                    "range": !instant,
                    "format": if instant { "table" } else { "time_series" },
                    "refId": char::from(b'A' + i as u8).to_string(),
                })
            })
            .collect(),
    )
}

/// A sender (rows) x receiver (columns) matrix of the pair series `expr`.
fn matrix_panel(id: u32, title: &str, expr: &str, y: u32, x: u32) -> Value {
    json!({
        "id": id,
        "type": "table",
        "title": title,
        "description": "Rows: the sender of the requests (src). Columns: the receiver that answers (dst). The share lost over the rules' window.",
        "datasource": {"type": "prometheus", "uid": DATASOURCE},
        "gridPos": {"h": 10, "w": 12, "x": x, "y": y},
        "targets": targets(&[q(expr, "")], true),
        "transformations": [{
            "id": "groupingToMatrix",
            "options": {"columnField": "dst", "rowField": "src", "valueField": "Value"}
        }],
        "fieldConfig": {
            "defaults": {
                "unit": "percentunit",
                "decimals": 2,
                "custom": {"cellOptions": {"type": "color-background"}},
                "thresholds": {"mode": "absolute", "steps": [
                    {"color": "green", "value": null},
                    {"color": "orange", "value": 0.001},
                    {"color": "red", "value": 0.01}
                ]}
            },
            "overrides": []
        }
    })
}

fn series_panel(id: u32, title: &str, unit: &str, queries: &[Query], y: u32, x: u32) -> Value {
    json!({
        "id": id,
        "type": "timeseries",
        "title": title,
        "datasource": {"type": "prometheus", "uid": DATASOURCE},
        "gridPos": {"h": 9, "w": 12, "x": x, "y": y},
        "targets": targets(queries, false),
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []}
    })
}

/// The panels: the two legs' matrices, then the series panels two a row.
fn panels(s: &Settings) -> Vec<Value> {
    let w = &s.window;
    let host_loss = |direction: &str, requests: &'static str, replies: &'static str| {
        vec![
            q(format!("mx:forward_loss_{direction}:ratio"), requests),
            q(format!("mx:return_loss_{direction}:ratio"), replies),
        ]
    };
    let series: [(&str, &str, Vec<Query>); 6] = [
        (
            "Loss into each host",
            "percentunit",
            host_loss("into", "requests into {{host}}", "replies into {{host}}"),
        ),
        (
            "Loss out of each host",
            "percentunit",
            host_loss(
                "out_of",
                "requests out of {{host}}",
                "replies out of {{host}}",
            ),
        ),
        (
            "Round trips: p50, p99, p99.9 per host",
            "s",
            vec![
                q("mx:rtt_p50:seconds", "p50 {{host}}"),
                q("mx:rtt_p99:seconds", "p99 {{host}}"),
                q("mx:rtt_p999:seconds", "p99.9 {{host}}"),
            ],
        ),
        (
            "Duplicates a second",
            "pps",
            vec![
                q(
                    format!("sum by (host) (rate(mx_request_duplicates_total[{w}]))"),
                    "requests twice at {{host}}",
                ),
                q(
                    format!("sum by (host) (rate(mx_reply_duplicates_total[{w}]))"),
                    "replies twice at {{host}}",
                ),
            ],
        ),
        (
            "Requests a second: sent, and settled by a reply",
            "pps",
            vec![
                q(
                    format!("sum by (host) (rate(mx_requests_sent_total[{w}]))"),
                    "sent by {{host}}",
                ),
                q(
                    format!("sum by (host) (rate(mx_requests_settled_total[{w}]))"),
                    "settled by {{host}}",
                ),
            ],
        ),
        (
            "Agents answering their scrapes",
            "short",
            vec![q(format!("sum(up{{job=\"{}\"}})", s.job), "agents up")],
        ),
    ];
    let mut panels = vec![
        matrix_panel(
            1,
            "Forward loss: requests, sender x receiver",
            "mx:forward_loss:ratio",
            0,
            0,
        ),
        matrix_panel(
            2,
            "Return loss: replies, sender x receiver",
            "mx:return_loss:ratio",
            0,
            12,
        ),
    ];
    for (i, (title, unit, queries)) in series.iter().enumerate() {
        let (row, column) = (i as u32 / 2, i as u32 % 2);
        panels.push(series_panel(
            3 + i as u32,
            title,
            unit,
            queries,
            10 + 9 * row,
            12 * column,
        ));
    }
    panels
}

/// The dashboard's JSON model (import it, and pick the Prometheus).
pub(crate) fn dashboard_json(s: &Settings) -> String {
    let doc = json!({
        "title": "mx: the fabric, always on",
        "uid": "mx-fabric",
        "tags": ["mx"],
        "schemaVersion": 39,
        "refresh": "1m",
        "time": {"from": "now-6h", "to": "now"},
        "templating": {"list": [{
            "name": "datasource",
            "label": "Prometheus",
            "type": "datasource",
            "query": "prometheus"
        }]},
        "panels": panels(s)
    });
    let mut text = serde_json::to_string_pretty(&doc).expect("a dashboard serializes");
    text.push('\n');
    text
}

/// Every PromQL expression of a dashboard's panels.
pub fn expressions(dashboard: &Value) -> Vec<String> {
    dashboard["panels"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|p| p["targets"].as_array().into_iter().flatten())
        .filter_map(|t| t["expr"].as_str().map(str::to_string))
        .collect()
}
