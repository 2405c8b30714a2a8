//! The Grafana dashboard: the fleet's forward and return loss as sender x
//! receiver matrices, each host's loss into and out of it, RTT percentiles
//! and duplicates, every panel on the recorded series of [`super::rules`].

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

/// The dashboard's JSON model (import it, and pick the Prometheus).
pub fn dashboard_json(s: &Settings) -> String {
    let w = &s.window;
    let panels = vec![
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
        series_panel(
            3,
            "Loss into each host",
            "percentunit",
            &[
                q("mx:forward_loss_into:ratio", "requests into {{host}}"),
                q("mx:return_loss_into:ratio", "replies into {{host}}"),
            ],
            10,
            0,
        ),
        series_panel(
            4,
            "Loss out of each host",
            "percentunit",
            &[
                q("mx:forward_loss_out_of:ratio", "requests out of {{host}}"),
                q("mx:return_loss_out_of:ratio", "replies out of {{host}}"),
            ],
            10,
            12,
        ),
        series_panel(
            5,
            "Round trips: p50, p99, p99.9 per host",
            "s",
            &[
                q("mx:rtt_p50:seconds", "p50 {{host}}"),
                q("mx:rtt_p99:seconds", "p99 {{host}}"),
                q("mx:rtt_p999:seconds", "p99.9 {{host}}"),
            ],
            19,
            0,
        ),
        series_panel(
            6,
            "Duplicates a second",
            "pps",
            &[
                q(
                    format!("sum by (host) (rate(mx_request_duplicates_total[{w}]))"),
                    "requests twice at {{host}}",
                ),
                q(
                    format!("sum by (host) (rate(mx_reply_duplicates_total[{w}]))"),
                    "replies twice at {{host}}",
                ),
            ],
            19,
            12,
        ),
        series_panel(
            7,
            "Requests a second, sent and answered",
            "pps",
            &[
                q("sum by (src) (mx:requests_sent:rate)", "sent by {{src}}"),
                q("sum by (dst) (mx:replies_sent:rate)", "answered by {{dst}}"),
            ],
            28,
            0,
        ),
        series_panel(
            8,
            "Agents answering their scrapes",
            "short",
            &[q(format!("sum(up{{job=\"{}\"}})", s.job), "agents up")],
            28,
            12,
        ),
    ];
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
        "panels": panels
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
