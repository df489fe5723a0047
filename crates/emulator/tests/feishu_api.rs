//! The Feishu emulator's Open API side over plain HTTP: each endpoint's answer, scopes per token
//! (99991679, 99991672), token errors, pagination, the idempotency rules, rate limits, injected
//! faults, the request log and the seed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use emulator::feishu::{
    App, ENDPOINTS, Fault, FeishuEmulator, PREFERRED_SCOPES, RateLimit, preferred_scope, scopes,
};
use serde_json::{Value, json};

const APP: &str = "cli_api_test_app";

/// Every scope the tools ask for, plus those of the reads outside that list.
fn all_scopes() -> Vec<&'static str> {
    let mut scopes = PREFERRED_SCOPES.to_vec();
    scopes.extend([
        "im:message.p2p_msg:get_as_user",
        "wiki:node:read",
        "docx:document:readonly",
    ]);
    scopes
}

fn http() -> reqwest::Client {
    // reqwest is built without a TLS crypto provider; plain HTTP still asks for one.
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

#[derive(Debug)]
struct Answer {
    status: u16,
    headers: reqwest::header::HeaderMap,
    body: Value,
}

impl Answer {
    fn code(&self) -> i64 {
        self.body["code"].as_i64().unwrap()
    }

    fn data(&self) -> &Value {
        assert_eq!(
            (self.status, self.code()),
            (200, 0),
            "expected success: {}",
            self.body
        );
        &self.body["data"]
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(|v| v.to_str().unwrap())
    }

    /// The subjects of `error.permission_violations`.
    fn violations(&self) -> Vec<String> {
        self.body["error"]["permission_violations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["subject"].as_str().unwrap().to_owned())
            .collect()
    }
}

struct Api {
    emulator: FeishuEmulator,
    token: String,
    http: reqwest::Client,
}

impl Api {
    async fn new() -> Api {
        let emulator = FeishuEmulator::start().await.unwrap();
        let token = emulator.issue_token(APP, &all_scopes());
        Api {
            emulator,
            token,
            http: http(),
        }
    }

    fn url(&self, path: &str, query: &[(&str, &str)]) -> url::Url {
        let mut url = url::Url::parse(&format!("{}{path}", self.emulator.base_url())).unwrap();
        if !query.is_empty() {
            url.query_pairs_mut().extend_pairs(query);
        }
        url
    }

    async fn call_as(
        &self,
        token: Option<&str>,
        method: &str,
        path: &str,
        query: &[(&str, &str)],
        body: Option<Value>,
    ) -> Answer {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let mut request = self.http.request(method, self.url(path, query));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let text = response.text().await.unwrap();
        let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
        Answer {
            status,
            headers,
            body,
        }
    }

    async fn get(&self, path: &str, query: &[(&str, &str)]) -> Answer {
        self.call_as(Some(&self.token), "GET", path, query, None)
            .await
    }

    async fn post(&self, path: &str, query: &[(&str, &str)], body: Value) -> Answer {
        self.call_as(Some(&self.token), "POST", path, query, Some(body))
            .await
    }

    async fn patch(&self, path: &str, body: Value) -> Answer {
        self.call_as(Some(&self.token), "PATCH", path, &[], Some(body))
            .await
    }

    async fn delete(&self, path: &str) -> Answer {
        self.call_as(Some(&self.token), "DELETE", path, &[], None)
            .await
    }
}

/// Fills a route's `{param}` placeholders in order.
fn path(route: &str, values: &[&str]) -> String {
    let mut out = String::new();
    let mut rest = route;
    let mut values = values.iter();
    while let Some(open) = rest.find('{') {
        let close = rest[open..].find('}').unwrap() + open;
        out.push_str(&rest[..open]);
        out.push_str(values.next().unwrap());
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    out
}

/// Monday 00:00 of this week in Asia/Shanghai, in Unix seconds (the seed's anchor).
fn week_start() -> i64 {
    let now = i64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs(),
    )
    .unwrap();
    let day = (now + 8 * 3600).div_euclid(86_400);
    let weekday = (day + 3).rem_euclid(7);
    (day - weekday) * 86_400 - 8 * 3600
}

fn text(message: &str) -> String {
    json!({ "text": message }).to_string()
}

// --- seed ---------------------------------------------------------------------------------

#[tokio::test]
async fn seed_ids_are_stable_and_served() {
    let api = Api::new().await;
    let other = FeishuEmulator::start().await.unwrap();
    let seed = api.emulator.seed();
    assert_eq!(seed, other.seed(), "two emulators seed the same ids");
    assert_eq!(seed.demo_user, "ou_demo_linxiao");
    assert_eq!(seed.people.len(), 13);
    assert_eq!(seed.open_id_of("张伟"), Some(seed.p2p_peer.as_str()));
    let served = api.call_as(None, "GET", "/_emulator/seed", &[], None).await;
    assert_eq!(served.body, serde_json::to_value(&seed).unwrap());
    assert!(
        served.header("x-tt-logid").is_some(),
        "every answer has a logid"
    );
}

// --- calendar -----------------------------------------------------------------------------

#[tokio::test]
async fn instance_view_expands_recurring_events_this_week() {
    let api = Api::new().await;
    let seed = api.emulator.seed();
    let primary = api.post(scopes::PRIMARY_CALENDAR, &[], json!({})).await;
    let calendar = &primary.data()["calendars"][0]["calendar"];
    assert_eq!(calendar["calendar_id"], seed.calendar_id);
    assert_eq!(calendar["type"], "primary");

    let week = week_start();
    let (from, to) = (week.to_string(), (week + 7 * 86_400).to_string());
    let view = api
        .get(
            &path(scopes::INSTANCE_VIEW, &[&seed.calendar_id]),
            &[("start_time", &from), ("end_time", &to)],
        )
        .await;
    let items = view.data()["items"].as_array().unwrap().clone();
    let summaries: Vec<&str> = items
        .iter()
        .map(|i| i["summary"].as_str().unwrap())
        .collect();
    assert_eq!(summaries.iter().filter(|s| **s == "每日站会").count(), 5);
    assert_eq!(
        summaries.iter().filter(|s| **s == "产品研发周会").count(),
        1
    );
    for single in ["v2.3 需求评审", "华星科技客户电话会", "与张伟 1:1"] {
        assert!(summaries.contains(&single), "{single} in {summaries:?}");
    }
    assert_eq!(items.len(), 9);
    let starts: Vec<i64> = items
        .iter()
        .map(|i| {
            i["start_time"]["timestamp"]
                .as_str()
                .unwrap()
                .parse()
                .unwrap()
        })
        .collect();
    assert!(starts.windows(2).all(|w| w[0] <= w[1]), "sorted by start");
    let series = seed.standup_event_id.trim_end_matches("_0");
    let tuesday = week + 86_400 + 9 * 3600 + 1800;
    assert!(
        items
            .iter()
            .any(|i| i["event_id"] == format!("{series}_{tuesday}")),
        "instances are <uuid>_<start>"
    );
    let review = items
        .iter()
        .find(|i| i["summary"] == "v2.3 需求评审")
        .unwrap();
    assert_eq!(review["event_id"], seed.review_event_id);
    assert_eq!(review["start_time"]["timezone"], "Asia/Shanghai");

    let next = api
        .get(
            &path(scopes::INSTANCE_VIEW, &[&seed.calendar_id]),
            &[
                ("start_time", &(week + 7 * 86_400).to_string()),
                ("end_time", &(week + 14 * 86_400).to_string()),
            ],
        )
        .await;
    let next = next.data()["items"].as_array().unwrap().clone();
    let team_building = next.iter().find(|i| i["summary"] == "公司团建").unwrap();
    assert!(team_building["start_time"]["date"].is_string(), "all-day");
    assert!(next.iter().any(|i| i["summary"] == "Q3 季度复盘"));
}

#[tokio::test]
async fn instance_view_ranges_must_be_under_forty_days() {
    let api = Api::new().await;
    let calendar = api.emulator.seed().calendar_id;
    let week = week_start();
    let view = |days: i64| {
        let to = (week + days * 86_400).to_string();
        let from = week.to_string();
        let path = path(scopes::INSTANCE_VIEW, &[&calendar]);
        let api = &api;
        async move {
            api.get(&path, &[("start_time", &from), ("end_time", &to)])
                .await
        }
    };
    let too_long = view(40).await;
    assert_eq!((too_long.status, too_long.code()), (400, 193103));
    assert!(view(39).await.data()["items"].is_array());
    let wrong = api
        .get(
            &path(
                scopes::INSTANCE_VIEW,
                &["feishu.cn_nobody@group.calendar.feishu.cn"],
            ),
            &[("start_time", "1"), ("end_time", "2")],
        )
        .await;
    assert_eq!((wrong.status, wrong.code()), (404, 191000));
}

#[tokio::test]
async fn get_event_with_attendees_and_one_instance() {
    let api = Api::new().await;
    let seed = api.emulator.seed();
    let review = api
        .get(
            &path(scopes::EVENT, &[&seed.calendar_id, &seed.review_event_id]),
            &[("need_attendee", "true")],
        )
        .await;
    let event = &review.data()["event"];
    assert_eq!(event["summary"], "v2.3 需求评审");
    let attendees = event["attendees"].as_array().unwrap();
    assert_eq!(attendees.len(), 6, "the organizer and five colleagues");
    assert!(attendees.iter().any(|a| a["display_name"] == "张伟"));
    assert_eq!(event["has_more_attendee"], false);

    let series = seed.standup_event_id.trim_end_matches("_0");
    let friday = week_start() + 4 * 86_400 + 9 * 3600 + 1800;
    let instance = api
        .get(
            &path(
                scopes::EVENT,
                &[&seed.calendar_id, &format!("{series}_{friday}")],
            ),
            &[],
        )
        .await;
    let event = &instance.data()["event"];
    assert_eq!(event["start_time"]["timestamp"], friday.to_string());
    assert_eq!(
        event["recurrence"],
        "FREQ=DAILY;INTERVAL=1;BYDAY=MO,TU,WE,TH,FR"
    );
    let saturday = friday + 86_400;
    let missing = api
        .get(
            &path(
                scopes::EVENT,
                &[&seed.calendar_id, &format!("{series}_{saturday}")],
            ),
            &[],
        )
        .await;
    assert_eq!((missing.status, missing.code()), (404, 193001));
}

fn event_body(summary: &str, start: i64) -> Value {
    json!({
        "summary": summary,
        "description": "由助手创建",
        "start_time": {"timestamp": start.to_string(), "timezone": "Asia/Shanghai"},
        "end_time": {"timestamp": (start + 1800).to_string(), "timezone": "Asia/Shanghai"},
        "need_notification": false,
    })
}

#[tokio::test]
async fn creating_an_event_twice_with_one_idempotency_key_makes_one_event() {
    let api = Api::new().await;
    let calendar = api.emulator.seed().calendar_id;
    let events = path(scopes::EVENTS, &[&calendar]);
    let key = "3f8a2c1e-5b7d-4e9f-a0b1-c2d3e4f5a6b7";
    let start = week_start() + 2 * 86_400 + 16 * 3600;
    let first = api
        .post(
            &events,
            &[("idempotency_key", key)],
            event_body("产品演示彩排", start),
        )
        .await;
    let second = api
        .post(
            &events,
            &[("idempotency_key", key)],
            event_body("产品演示彩排", start),
        )
        .await;
    let id = first.data()["event"]["event_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(id.ends_with("_0"));
    assert_eq!(second.data()["event"]["event_id"], id);
    assert_eq!(api.emulator.events_created(), 1);
    assert_eq!(
        api.emulator.writes_to(scopes::EVENTS),
        2,
        "both calls went through"
    );
    let logged: Vec<_> = api
        .emulator
        .requests()
        .into_iter()
        .filter(|r| r.route.as_deref() == Some(scopes::EVENTS))
        .collect();
    assert!(
        logged
            .iter()
            .all(|r| r.write && r.idempotency_key.as_deref() == Some(key))
    );

    let other = api
        .post(
            &events,
            &[("idempotency_key", "9c1d2e3f-4a5b-6c7d-8e9f-0a1b2c3d4e5f")],
            event_body("产品演示彩排", start),
        )
        .await;
    assert_ne!(other.data()["event"]["event_id"], id);
    assert_eq!(api.emulator.events_created(), 2);
    let short = api
        .post(
            &events,
            &[("idempotency_key", "too-short")],
            event_body("x", start),
        )
        .await;
    assert_eq!((short.status, short.code()), (400, 190002));
    let backwards = api.post(&events, &[], event_body("x", start)).await;
    assert_eq!(backwards.status, 200);
    let mut bad = event_body("x", start);
    bad["end_time"]["timestamp"] = json!((start - 60).to_string());
    let bad = api.post(&events, &[], bad).await;
    assert_eq!((bad.status, bad.code()), (400, 190002));
}

#[tokio::test]
async fn attendees_patch_and_delete() {
    let api = Api::new().await;
    let seed = api.emulator.seed();
    let calendar = &seed.calendar_id;
    let start = week_start() + 3 * 86_400 + 10 * 3600;
    let created = api
        .post(
            &path(scopes::EVENTS, &[calendar]),
            &[],
            event_body("设计评审", start),
        )
        .await;
    let id = created.data()["event"]["event_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let wangfang = seed.open_id_of("王芳").unwrap();
    let lina = seed.open_id_of("李娜").unwrap();
    let added = api
        .post(
            &path(scopes::ATTENDEES, &[calendar, &id]),
            &[("user_id_type", "open_id")],
            json!({"attendees": [
                {"type": "user", "user_id": wangfang},
                {"type": "user", "user_id": lina, "is_optional": true},
            ], "need_notification": false}),
        )
        .await;
    let attendees = added.data()["attendees"].as_array().unwrap().clone();
    assert_eq!(
        attendees.len(),
        3,
        "the organizer joins with the first attendees"
    );
    assert!(
        attendees
            .iter()
            .any(|a| a["user_id"] == wangfang && a["rsvp_status"] == "needs_action")
    );
    let unknown = api
        .post(
            &path(scopes::ATTENDEES, &[calendar, &id]),
            &[],
            json!({"attendees": [{"type": "user", "user_id": "ou_nobody"}]}),
        )
        .await;
    assert_eq!((unknown.status, unknown.code()), (404, 195100));

    let patched = api
        .patch(
            &path(scopes::EVENT, &[calendar, &id]),
            json!({"summary": "设计评审（改到下午）",
                   "start_time": {"timestamp": (start + 4 * 3600).to_string()},
                   "end_time": {"timestamp": (start + 5 * 3600).to_string()}}),
        )
        .await;
    let event = &patched.data()["event"];
    assert_eq!(event["summary"], "设计评审（改到下午）");
    assert_eq!(
        event["start_time"]["timestamp"],
        (start + 4 * 3600).to_string()
    );

    let deleted = api.delete(&path(scopes::EVENT, &[calendar, &id])).await;
    assert_eq!(deleted.data(), &json!({}));
    let gone = api.get(&path(scopes::EVENT, &[calendar, &id]), &[]).await;
    assert_eq!((gone.status, gone.code()), (403, 193003));
    let again = api.delete(&path(scopes::EVENT, &[calendar, &id])).await;
    assert_eq!(again.code(), 193003);
    let none = api
        .delete(&path(
            scopes::EVENT,
            &[calendar, "00000000-0000-0000-0000-000000000000_0"],
        ))
        .await;
    assert_eq!((none.status, none.code()), (404, 193001));
}

#[tokio::test]
async fn changing_one_instance_makes_an_exception_and_deleting_one_removes_it() {
    let api = Api::new().await;
    let seed = api.emulator.seed();
    let calendar = &seed.calendar_id;
    let series = seed.standup_event_id.trim_end_matches("_0");
    let week = week_start();
    let wednesday = week + 2 * 86_400 + 9 * 3600 + 1800;
    let thursday = wednesday + 86_400;
    let instance = format!("{series}_{wednesday}");
    let patched = api
        .patch(
            &path(scopes::EVENT, &[calendar, &instance]),
            json!({"summary": "每日站会（线上）"}),
        )
        .await;
    let event = &patched.data()["event"];
    assert_eq!(event["event_id"], instance);
    assert_eq!(event["is_exception"], true);
    assert_eq!(event["recurring_event_id"], seed.standup_event_id);
    assert!(event.get("recurrence").is_none());
    let deleted = api
        .delete(&path(
            scopes::EVENT,
            &[calendar, &format!("{series}_{thursday}")],
        ))
        .await;
    assert_eq!(deleted.status, 200);

    let view = api
        .get(
            &path(scopes::INSTANCE_VIEW, &[calendar]),
            &[
                ("start_time", &week.to_string()),
                ("end_time", &(week + 7 * 86_400).to_string()),
            ],
        )
        .await;
    let items = view.data()["items"].as_array().unwrap().clone();
    let standups: Vec<&Value> = items
        .iter()
        .filter(|i| i["summary"].as_str().unwrap().starts_with("每日站会"))
        .collect();
    assert_eq!(standups.len(), 4, "Thursday's is gone");
    let online: Vec<&&Value> = standups
        .iter()
        .filter(|i| i["summary"] == "每日站会（线上）")
        .collect();
    assert_eq!(online.len(), 1, "only Wednesday changed");
    assert_eq!(online[0]["is_exception"], true);
}

#[tokio::test]
async fn free_busy_lists_a_colleagues_meetings() {
    let api = Api::new().await;
    let seed = api.emulator.seed();
    let week = week_start();
    let rfc = |ts: i64| {
        let local = ts + 8 * 3600;
        let days = local.div_euclid(86_400);
        // Civil date from days (enough for the 21st century).
        let z = days + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z - era * 146_097;
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let d = doy - (153 * mp + 2) / 5 + 1;
        let m = if mp < 10 { mp + 3 } else { mp - 9 };
        let y = yoe + era * 400 + i64::from(m <= 2);
        let secs = local.rem_euclid(86_400);
        format!(
            "{y:04}-{m:02}-{d:02}T{:02}:{:02}:00+08:00",
            secs / 3600,
            secs % 3600 / 60
        )
    };
    let zhangwei = seed.open_id_of("张伟").unwrap();
    let busy = api
        .post(
            scopes::FREEBUSY,
            &[("user_id_type", "open_id")],
            json!({"time_min": rfc(week + 86_400), "time_max": rfc(week + 2 * 86_400),
                   "user_id": zhangwei, "need_rsvp_status": true}),
        )
        .await;
    let list = busy.data()["freebusy_list"].as_array().unwrap().clone();
    let starts: Vec<&str> = list
        .iter()
        .map(|b| b["start_time"].as_str().unwrap())
        .collect();
    assert_eq!(
        starts,
        [
            rfc(week + 86_400 + 9 * 3600 + 1800),
            rfc(week + 86_400 + 10 * 3600)
        ],
        "Tuesday: the stand-up and the review"
    );
    assert!(list.iter().all(|b| b["rsvp_status"].is_string()));
    let too_long = api
        .post(
            scopes::FREEBUSY,
            &[],
            json!({"time_min": rfc(week), "time_max": rfc(week + 91 * 86_400), "user_id": zhangwei}),
        )
        .await;
    assert_eq!((too_long.status, too_long.code()), (400, 190002));
    let nobody = api
        .post(
            scopes::FREEBUSY,
            &[],
            json!({"time_min": rfc(week), "time_max": rfc(week + 86_400), "user_id": "ou_nobody"}),
        )
        .await;
    assert_eq!(nobody.code(), 195100);
}

// --- IM -----------------------------------------------------------------------------------

#[tokio::test]
async fn chat_list_pages_and_leaves_out_one_to_one_chats() {
    let api = Api::new().await;
    let seed = api.emulator.seed();
    let mut ids: Vec<String> = Vec::new();
    let mut token: Option<String> = None;
    let mut pages = 0;
    loop {
        let mut query = vec![("page_size", "2")];
        if let Some(token) = &token {
            query.push(("page_token", token));
        }
        let page = api.get(scopes::CHATS, &query).await;
        let data = page.data().clone();
        pages += 1;
        ids.extend(
            data["items"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c["chat_id"].as_str().unwrap().to_owned()),
        );
        if data["has_more"] == false {
            assert!(
                data.get("page_token").is_none(),
                "no token on the last page"
            );
            break;
        }
        token = Some(data["page_token"].as_str().unwrap().to_owned());
    }
    assert_eq!(pages, 3);
    assert_eq!(ids.len(), 5);
    assert!(ids.contains(&seed.all_hands_chat_id));
    assert!(!ids.contains(&seed.p2p_chat_id));
    let too_big = api.get(scopes::CHATS, &[("page_size", "101")]).await;
    assert_eq!((too_big.status, too_big.code()), (400, 232001));
}

#[tokio::test]
async fn chat_search_and_chat_information() {
    let api = Api::new().await;
    let seed = api.emulator.seed();
    let found = api.get(scopes::CHAT_SEARCH, &[("query", "羽毛球")]).await;
    let items = found.data()["items"].as_array().unwrap().clone();
    assert_eq!(items.len(), 1);
    assert_eq!(items[0]["chat_id"], seed.badminton_chat_id);
    let by_member = api.get(scopes::CHAT_SEARCH, &[("query", "周杰")]).await;
    assert_eq!(by_member.data()["items"].as_array().unwrap().len(), 3);
    let empty = api.get(scopes::CHAT_SEARCH, &[("query", "")]).await;
    assert_eq!(empty.data()["items"], json!([]));

    let big = api
        .get(&path(scopes::CHAT, &[&seed.all_hands_chat_id]), &[])
        .await;
    assert_eq!(big.data()["user_count"], "128");
    assert_eq!(big.data()["name"], "星云科技全员群");
    assert_eq!(big.data()["chat_mode"], "group");
    let p2p = api
        .get(&path(scopes::CHAT, &[&seed.p2p_chat_id]), &[])
        .await;
    assert_eq!(p2p.data()["chat_mode"], "p2p");
    assert_eq!(p2p.data()["user_count"], "2");
    let unknown = api.get(&path(scopes::CHAT, &["oc_nope"]), &[]).await;
    assert_eq!((unknown.status, unknown.code()), (400, 232006));
}

#[tokio::test]
async fn message_history_pages_at_fifty_and_keeps_its_sort() {
    let api = Api::new().await;
    let seed = api.emulator.seed();
    let chat = seed.product_chat_id.as_str();
    let base = [
        ("container_id_type", "chat"),
        ("container_id", chat),
        ("sort_type", "ByCreateTimeAsc"),
        ("page_size", "50"),
    ];
    let first = api.get(scopes::MESSAGES, &base).await;
    let data = first.data().clone();
    assert_eq!(data["items"].as_array().unwrap().len(), 50);
    assert_eq!(data["has_more"], true);
    let token = data["page_token"].as_str().unwrap().to_owned();
    let mut query = base.to_vec();
    query.push(("page_token", &token));
    let second = api.get(scopes::MESSAGES, &query).await;
    let rest = second.data()["items"].as_array().unwrap().clone();
    assert_eq!(rest.len(), seed.product_chat_messages - 50);
    assert_eq!(second.data()["has_more"], false);
    let times: Vec<i64> = data["items"]
        .as_array()
        .unwrap()
        .iter()
        .chain(rest.iter())
        .map(|m| m["create_time"].as_str().unwrap().parse().unwrap())
        .collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]));
    let message = &rest[0];
    assert_eq!(message["chat_id"], chat);
    assert_eq!(message["msg_type"], "text");
    assert_eq!(message["sender"]["id_type"], "open_id");
    let content: Value =
        serde_json::from_str(message["body"]["content"].as_str().unwrap()).unwrap();
    assert!(content["text"].is_string());

    let mut switched = query.clone();
    switched[2] = ("sort_type", "ByCreateTimeDesc");
    let switched = api.get(scopes::MESSAGES, &switched).await;
    assert_eq!((switched.status, switched.code()), (400, 230001));
    let mut too_big = base.to_vec();
    too_big[3] = ("page_size", "51");
    let too_big = api.get(scopes::MESSAGES, &too_big).await;
    assert_eq!(too_big.code(), 230001);
    let newest = api
        .get(
            scopes::MESSAGES,
            &[
                ("container_id_type", "chat"),
                ("container_id", chat),
                ("sort_type", "ByCreateTimeDesc"),
                ("page_size", "1"),
            ],
        )
        .await;
    assert_eq!(
        newest.data()["items"][0]["create_time"],
        times.last().unwrap().to_string()
    );
}

#[tokio::test]
async fn reading_messages_as_a_user_needs_the_chat_kind_scope() {
    let api = Api::new().await;
    let seed = api.emulator.seed();
    let read = |token: String, chat: String| {
        let api = &api;
        async move {
            api.call_as(
                Some(&token),
                "GET",
                scopes::MESSAGES,
                &[("container_id_type", "chat"), ("container_id", &chat)],
                None,
            )
            .await
        }
    };
    let only_read = api.emulator.issue_token(APP, &["im:message:readonly"]);
    let answer = read(only_read.clone(), seed.product_chat_id.clone()).await;
    assert_eq!((answer.status, answer.code()), (400, 99991679));
    assert_eq!(answer.violations(), ["im:message.group_msg:get_as_user"]);
    assert_eq!(
        answer.body["error"]["permission_violations"][0]["type"],
        "action_privilege_required"
    );
    assert!(
        answer.body["msg"]
            .as_str()
            .unwrap()
            .contains("required one of these privileges: [")
    );
    let nothing = api.emulator.issue_token(APP, &["im:chat:readonly"]);
    let answer = read(nothing, seed.product_chat_id.clone()).await;
    assert_eq!(
        answer.violations(),
        ["im:message", "im:message:readonly"],
        "every alternative of the first requirement the token fails"
    );
    let answer = read(only_read, seed.p2p_chat_id.clone()).await;
    assert_eq!(answer.violations(), ["im:message.p2p_msg:get_as_user"]);
    let group = api
        .emulator
        .issue_token(APP, &["im:message", "im:message.group_msg:get_as_user"]);
    assert_eq!(read(group, seed.release_chat_id.clone()).await.status, 200);
}

fn message(receive_id: &str, body: &str, uuid: &str) -> Value {
    json!({"receive_id": receive_id, "msg_type": "text", "content": text(body), "uuid": uuid})
}

#[tokio::test]
async fn a_repeated_uuid_within_an_hour_sends_one_message() {
    let api = Api::new().await;
    let chat = api.emulator.seed().release_chat_id;
    let uuid = "a0d69e20-1dd1-458b-b525-dfeca4015204";
    let send = |uuid: &'static str| {
        let api = &api;
        let chat = chat.clone();
        async move {
            api.post(
                scopes::MESSAGES,
                &[("receive_id_type", "chat_id")],
                message(&chat, "发布说明已更新，请查收。", uuid),
            )
            .await
        }
    };
    let first = send(uuid).await;
    let second = send(uuid).await;
    let id = first.data()["message_id"].as_str().unwrap().to_owned();
    assert!(id.starts_with("om_"));
    assert_eq!(second.data()["message_id"], id);
    assert_eq!(first.data()["chat_id"], chat);
    assert_eq!(first.data()["sender"]["id"], "ou_demo_linxiao");
    let created = api.emulator.messages_created_in(&chat);
    assert_eq!(
        created.len(),
        1,
        "one message although two requests succeeded"
    );
    assert_eq!(created[0].content, text("发布说明已更新，请查收。"));
    assert_eq!(api.emulator.writes_to(scopes::MESSAGES), 2);

    api.emulator.advance_clock(Duration::from_secs(61 * 60));
    let later = send(uuid).await;
    assert_ne!(later.data()["message_id"], id, "the window is one hour");
    assert_eq!(api.emulator.messages_created_in(&chat).len(), 2);

    let history = api
        .get(
            scopes::MESSAGES,
            &[
                ("container_id_type", "chat"),
                ("container_id", &chat),
                ("sort_type", "ByCreateTimeDesc"),
                ("page_size", "2"),
            ],
        )
        .await;
    assert_eq!(history.data()["items"][1]["message_id"], id);
}

#[tokio::test]
async fn sending_as_a_user_needs_both_scopes() {
    let api = Api::new().await;
    let chat = api.emulator.seed().release_chat_id;
    let attempt = |scopes_held: &'static [&'static str]| {
        let api = &api;
        let chat = chat.clone();
        async move {
            let token = api.emulator.issue_token(APP, scopes_held);
            api.call_as(
                Some(&token),
                "POST",
                scopes::MESSAGES,
                &[("receive_id_type", "chat_id")],
                Some(message(&chat, "你好", "u-1")),
            )
            .await
        }
    };
    let answer = attempt(&["im:message"]).await;
    assert_eq!(answer.code(), 99991679);
    assert_eq!(answer.violations(), ["im:message.send_as_user"]);
    let answer = attempt(&["im:message.send_as_user"]).await;
    assert_eq!(answer.violations(), ["im:message"]);
    let answer = attempt(&[]).await;
    assert_eq!(
        answer.violations(),
        ["im:message"],
        "the first requirement a token fails, as Feishu's gateway reports it"
    );
    assert_eq!(
        attempt(&["im:message", "im:message.send_as_user"])
            .await
            .status,
        200
    );
    assert!(api.emulator.messages_created_in(&chat).len() == 1);
}

#[tokio::test]
async fn sending_to_a_person_uses_or_opens_the_one_to_one_chat() {
    let api = Api::new().await;
    let seed = api.emulator.seed();
    let to = |open_id: String, uuid: &'static str| {
        let api = &api;
        async move {
            api.post(
                scopes::MESSAGES,
                &[("receive_id_type", "open_id")],
                message(&open_id, "下午有空吗？", uuid),
            )
            .await
        }
    };
    let zhangwei = to(seed.p2p_peer.clone(), "p-1").await;
    assert_eq!(zhangwei.data()["chat_id"], seed.p2p_chat_id);
    let wangfang = seed.open_id_of("王芳").unwrap().to_owned();
    let first = to(wangfang.clone(), "p-2").await;
    let chat = first.data()["chat_id"].as_str().unwrap().to_owned();
    assert_ne!(chat, seed.p2p_chat_id);
    let again = to(wangfang, "p-3").await;
    assert_eq!(again.data()["chat_id"], chat);
    assert_eq!(api.emulator.messages_created_in(&chat).len(), 2);
    let message_id = again.data()["message_id"].as_str().unwrap();
    assert_eq!(api.emulator.chat_of_message(message_id), Some(chat));
    let nobody = to("ou_nobody".to_owned(), "p-4").await;
    assert_eq!((nobody.status, nobody.code()), (400, 230034));
    let bad = api
        .post(
            scopes::MESSAGES,
            &[("receive_id_type", "chat_id")],
            json!({"receive_id": seed.release_chat_id, "msg_type": "text", "content": "not json"}),
        )
        .await;
    assert_eq!((bad.status, bad.code()), (400, 230001));
    let no_type = api
        .post(
            scopes::MESSAGES,
            &[],
            message(&seed.release_chat_id, "x", "p-5"),
        )
        .await;
    assert_eq!(no_type.code(), 230001);
}

#[tokio::test]
async fn a_repeated_uuid_replies_once() {
    let api = Api::new().await;
    let seed = api.emulator.seed();
    let history = api
        .get(
            scopes::MESSAGES,
            &[
                ("container_id_type", "chat"),
                ("container_id", &seed.p2p_chat_id),
            ],
        )
        .await;
    let parent = history.data()["items"][0]["message_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let reply = json!({"msg_type": "text", "content": text("好的，周五聊。"), "uuid": "r-42"});
    let reply_path = path(scopes::MESSAGE_REPLY, &[&parent]);
    let first = api.post(&reply_path, &[], reply.clone()).await;
    let second = api.post(&reply_path, &[], reply).await;
    assert_eq!(first.data()["parent_id"], parent);
    assert_eq!(first.data()["root_id"], parent);
    assert_eq!(second.data()["message_id"], first.data()["message_id"]);
    let created = api.emulator.messages_created_in(&seed.p2p_chat_id);
    assert_eq!(created.len(), 1);
    assert_eq!(created[0].parent_id.as_deref(), Some(parent.as_str()));
    let unknown = api
        .post(
            &path(scopes::MESSAGE_REPLY, &["om_nope"]),
            &[],
            json!({"msg_type": "text", "content": text("x")}),
        )
        .await;
    assert_eq!(unknown.code(), 230001);
}

// --- docs ---------------------------------------------------------------------------------

#[tokio::test]
async fn doc_search_pages_and_finds_wiki_nodes() {
    let api = Api::new().await;
    let seed = api.emulator.seed();
    let first = api
        .post(
            scopes::DOC_SEARCH,
            &[],
            json!({"query": "", "doc_filter": {}, "page_size": 3}),
        )
        .await;
    let data = first.data().clone();
    assert_eq!(data["total"], 4);
    assert_eq!(data["res_units"].as_array().unwrap().len(), 3);
    let second = api
        .post(
            scopes::DOC_SEARCH,
            &[],
            json!({"query": "", "doc_filter": {}, "page_size": 3, "page_token": data["page_token"]}),
        )
        .await;
    assert_eq!(second.data()["res_units"].as_array().unwrap().len(), 1);
    assert_eq!(second.data()["has_more"], false);

    let prd = api
        .post(
            scopes::DOC_SEARCH,
            &[],
            json!({"query": "PRD", "doc_filter": {}}),
        )
        .await;
    let unit = &prd.data()["res_units"][0];
    assert_eq!(unit["entity_type"], "DOC");
    assert_eq!(unit["result_meta"]["token"], seed.prd_document_id);
    assert_eq!(unit["result_meta"]["doc_types"], "DOCX");
    assert!(
        unit["title_highlighted"]
            .as_str()
            .unwrap()
            .contains("<h>PRD</h>")
    );

    let wiki = api
        .post(
            scopes::DOC_SEARCH,
            &[],
            json!({"query": "入职", "wiki_filter": {}}),
        )
        .await;
    let units = wiki.data()["res_units"].as_array().unwrap().clone();
    assert_eq!(units.len(), 1);
    assert_eq!(units[0]["entity_type"], "WIKI");
    assert_eq!(units[0]["result_meta"]["token"], seed.onboarding_wiki_node);
    let no_filter = api
        .post(scopes::DOC_SEARCH, &[], json!({"query": "PRD"}))
        .await;
    assert_eq!((no_filter.status, no_filter.code()), (400, 1274001));
}

#[tokio::test]
async fn a_document_reads_as_markdown_and_a_wiki_node_leads_to_its_document() {
    let api = Api::new().await;
    let seed = api.emulator.seed();
    let read = |token: String| {
        let api = &api;
        async move {
            api.get(
                scopes::DOC_CONTENT,
                &[
                    ("doc_token", &token),
                    ("doc_type", "docx"),
                    ("content_type", "markdown"),
                ],
            )
            .await
        }
    };
    let prd = read(seed.prd_document_id.clone()).await;
    let markdown = prd.data()["content"].as_str().unwrap().to_owned();
    assert!(markdown.starts_with("# v2.3 产品需求文档（PRD）\n\n## 背景"));
    assert!(markdown.contains("- 订单列表支持导出 Excel（.xlsx），单次最多 5 万行"));
    assert!(markdown.contains("**数据导出**"));
    assert!(markdown.contains("1. 在订单列表右上角增加「导出」按钮\n\n2. 导出内容"));

    let node = read(seed.onboarding_wiki_node.clone()).await;
    assert_eq!(
        (node.status, node.code()),
        (400, 2889914),
        "a wiki token is not a doc token"
    );
    let resolved = api
        .get(scopes::WIKI_NODE, &[("token", &seed.onboarding_wiki_node)])
        .await;
    let obj = resolved.data()["node"]["obj_token"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(obj, seed.onboarding_document_id);
    assert_eq!(resolved.data()["node"]["obj_type"], "docx");
    let onboarding = read(obj).await;
    assert!(
        onboarding.data()["content"]
            .as_str()
            .unwrap()
            .contains("## 第一天")
    );
    let wrong_type = api
        .get(
            scopes::DOC_CONTENT,
            &[
                ("doc_token", &seed.prd_document_id),
                ("doc_type", "doc"),
                ("content_type", "markdown"),
            ],
        )
        .await;
    assert_eq!(wrong_type.code(), 2889904);
}

#[tokio::test]
async fn create_convert_and_append_once_per_client_token() {
    let api = Api::new().await;
    let created = api
        .post(scopes::DOCUMENTS, &[], json!({"title": "周会纪要 草稿"}))
        .await;
    let document = created.data()["document"].clone();
    let id = document["document_id"].as_str().unwrap().to_owned();
    assert_eq!(id.len(), 27);
    assert_eq!(document["revision_id"], 1);
    let another = api
        .post(scopes::DOCUMENTS, &[], json!({"title": "周会纪要 草稿"}))
        .await;
    assert_ne!(
        another.data()["document"]["document_id"],
        id,
        "no idempotency"
    );
    assert_eq!(api.emulator.documents_created(), 2);

    let converted = api
        .post(
            scopes::BLOCK_CONVERT,
            &[],
            json!({"content_type": "markdown",
                   "content": "## 结论\n\n- 导出功能进入 v2.3\n- 批量编辑推迟\n\n下次周会再同步。"}),
        )
        .await;
    let data = converted.data().clone();
    let blocks = data["blocks"].as_array().unwrap().clone();
    let types: Vec<i64> = blocks
        .iter()
        .map(|b| b["block_type"].as_i64().unwrap())
        .collect();
    assert_eq!(types, [4, 12, 12, 2]);
    assert_eq!(data["first_level_block_ids"].as_array().unwrap().len(), 4);
    assert_eq!(
        blocks[1]["bullet"]["elements"][0]["text_run"]["content"],
        "导出功能进入 v2.3"
    );
    assert_eq!(
        api.emulator.block_count(&id),
        Some(0),
        "convert does not write"
    );

    let children = path(scopes::BLOCK_CHILDREN, &[&id, &id]);
    let token = "fe599b60-450f-46ff-b2ef-9f6675625b97";
    let query = [("document_revision_id", "-1"), ("client_token", token)];
    let first = api
        .post(&children, &query, json!({"children": blocks, "index": -1}))
        .await;
    let second = api
        .post(&children, &query, json!({"children": blocks, "index": -1}))
        .await;
    assert_eq!(first.data()["client_token"], token);
    assert_eq!(first.data()["document_revision_id"], 2);
    assert_eq!(second.data(), first.data());
    assert_eq!(first.data()["children"][0]["parent_id"], id);
    assert_eq!(api.emulator.block_count(&id), Some(4), "appended once");
    assert_eq!(api.emulator.writes_to(scopes::BLOCK_CHILDREN), 2);

    let content = api
        .get(
            scopes::DOC_CONTENT,
            &[
                ("doc_token", &id),
                ("doc_type", "docx"),
                ("content_type", "markdown"),
            ],
        )
        .await;
    assert_eq!(
        content.data()["content"],
        "# 周会纪要 草稿\n\n## 结论\n\n- 导出功能进入 v2.3\n\n- 批量编辑推迟\n\n下次周会再同步。"
    );
    let untokened = api
        .post(&children, &[], json!({"children": [blocks[3].clone()]}))
        .await;
    assert!(untokened.data()["client_token"].as_str().unwrap().len() >= 32);
    assert_eq!(api.emulator.block_count(&id), Some(5));

    let missing = api
        .post(
            &path(scopes::BLOCK_CHILDREN, &["doxNope", "doxNope"]),
            &[],
            json!({"children": [blocks[3].clone()]}),
        )
        .await;
    assert_eq!((missing.status, missing.code()), (404, 1770002));
    let too_many: Vec<Value> = std::iter::repeat_n(blocks[3].clone(), 51).collect();
    let too_many = api
        .post(&children, &[], json!({"children": too_many}))
        .await;
    assert_eq!((too_many.status, too_many.code()), (400, 1770001));
}

// --- tasks --------------------------------------------------------------------------------

async fn my_tasks(api: &Api, query: &[(&str, &str)]) -> Vec<Value> {
    let mut all = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let mut q = query.to_vec();
        q.push(("type", "my_tasks"));
        if let Some(token) = &token {
            q.push(("page_token", token));
        }
        let page = api.get(scopes::TASKS, &q).await;
        let data = page.data().clone();
        all.extend(data["items"].as_array().unwrap().iter().cloned());
        match data["page_token"].as_str() {
            Some(next) if data["has_more"] == true => token = Some(next.to_owned()),
            _ => return all,
        }
    }
}

#[tokio::test]
async fn my_tasks_page_and_filter_by_completion() {
    let api = Api::new().await;
    let seed = api.emulator.seed();
    let all = my_tasks(&api, &[("page_size", "4")]).await;
    assert_eq!(all.len(), 9, "the delegated task is not mine");
    assert!(all.iter().all(|t| t["guid"] != seed.delegated_task_guid));
    let done = my_tasks(&api, &[("completed", "true")]).await;
    assert_eq!(done.len(), 3);
    assert!(
        done.iter()
            .all(|t| t["status"] == "done" && t["completed_at"] != "0")
    );
    assert!(done.iter().any(|t| t["guid"] == seed.completed_task_guid));
    let open = my_tasks(&api, &[("completed", "false")]).await;
    assert_eq!(open.len(), 6);
    let task = open
        .iter()
        .find(|t| t["guid"] == seed.open_task_guid)
        .unwrap();
    assert_eq!(task["summary"], "整理 v2.3 需求评审意见");
    assert_eq!(task["completed_at"], "0");
    assert_eq!(task["due"]["is_all_day"], false);
    assert_eq!(task["members"][0]["role"], "assignee");
    let too_big = api.get(scopes::TASKS, &[("page_size", "101")]).await;
    assert_eq!((too_big.status, too_big.code()), (400, 1470400));
}

#[tokio::test]
async fn a_client_token_is_kept_five_minutes() {
    let api = Api::new().await;
    let me = api.emulator.seed().demo_user;
    let body = json!({
        "summary": "跟进华星科技的定制报表需求",
        "due": {"timestamp": "1767225600000", "is_all_day": true},
        "members": [{"id": me, "type": "user", "role": "assignee"}],
        "client_token": "6f1d0c2e-7a4b-4c8d-9e0f-1a2b3c4d5e6f",
    });
    let first = api.post(scopes::TASKS, &[], body.clone()).await;
    let second = api.post(scopes::TASKS, &[], body.clone()).await;
    let guid = first.data()["task"]["guid"].as_str().unwrap().to_owned();
    assert_eq!(second.data()["task"]["guid"], guid);
    assert_eq!(api.emulator.tasks_created(), 1);
    assert_eq!(api.emulator.writes_to(scopes::TASKS), 2);
    let mine = my_tasks(&api, &[]).await;
    assert!(mine.iter().any(|t| t["guid"] == guid));

    api.emulator.advance_clock(Duration::from_secs(5 * 60 + 1));
    let later = api.post(scopes::TASKS, &[], body).await;
    assert_ne!(later.data()["task"]["guid"], guid);
    assert_eq!(api.emulator.tasks_created(), 2);
    let short = api
        .post(
            scopes::TASKS,
            &[],
            json!({"summary": "x", "client_token": "short"}),
        )
        .await;
    assert_eq!((short.status, short.code()), (400, 1470400));
    let empty = api.post(scopes::TASKS, &[], json!({"summary": "  "})).await;
    assert_eq!(empty.code(), 1470400);
}

#[tokio::test]
async fn completing_and_reopening_a_task() {
    let api = Api::new().await;
    let seed = api.emulator.seed();
    let task = path(scopes::TASK, &[&seed.open_task_guid]);
    let complete =
        json!({"task": {"completed_at": "1767225600000"}, "update_fields": ["completed_at"]});
    let done = api.patch(&task, complete.clone()).await;
    assert_eq!(done.data()["task"]["status"], "done");
    assert_eq!(done.data()["task"]["completed_at"], "1767225600000");
    let twice = api.patch(&task, complete).await;
    assert_eq!((twice.status, twice.code()), (400, 1470400));
    let reopened = api
        .patch(
            &task,
            json!({"task": {"completed_at": "0"}, "update_fields": ["completed_at"]}),
        )
        .await;
    assert_eq!(reopened.data()["task"]["status"], "todo");
    let renamed = api
        .patch(
            &task,
            json!({"task": {"summary": "整理评审意见并更新 PRD"}, "update_fields": ["summary"]}),
        )
        .await;
    assert_eq!(renamed.data()["task"]["summary"], "整理评审意见并更新 PRD");
    let no_fields = api.patch(&task, json!({"task": {}})).await;
    assert_eq!(no_fields.code(), 1470400);
    let unknown = api
        .patch(
            &path(scopes::TASK, &["00000000-0000-0000-0000-000000000000"]),
            json!({"task": {"completed_at": "0"}, "update_fields": ["completed_at"]}),
        )
        .await;
    assert_eq!((unknown.status, unknown.code()), (404, 1470404));
}

// --- contact and drive --------------------------------------------------------------------

#[tokio::test]
async fn searching_people_and_reading_one() {
    let api = Api::new().await;
    let seed = api.emulator.seed();
    let first = api
        .get(scopes::USER_SEARCH, &[("query", "张"), ("page_size", "1")])
        .await;
    let data = first.data().clone();
    assert_eq!(data["users"].as_array().unwrap().len(), 1);
    assert_eq!(data["has_more"], true);
    let second = api
        .get(
            scopes::USER_SEARCH,
            &[
                ("query", "张"),
                ("page_size", "1"),
                ("page_token", data["page_token"].as_str().unwrap()),
            ],
        )
        .await;
    let names: Vec<&str> = [&data["users"][0], &second.data()["users"][0]]
        .iter()
        .map(|u| u["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["张伟", "张晓明"]);
    assert_eq!(second.data()["has_more"], false);
    let english = api
        .get(scopes::USER_SEARCH, &[("query", "wang fang")])
        .await;
    assert_eq!(
        english.data()["users"][0]["open_id"],
        seed.open_id_of("王芳").unwrap()
    );

    let user = api
        .get(
            &path(scopes::USER, &[&seed.p2p_peer]),
            &[("user_id_type", "open_id")],
        )
        .await;
    let user = &user.data()["user"];
    assert_eq!(user["name"], "张伟");
    assert_eq!(user["job_title"], "研发负责人");
    let by_union = api
        .get(
            &path(scopes::USER, &[user["union_id"].as_str().unwrap()]),
            &[("user_id_type", "union_id")],
        )
        .await;
    assert_eq!(by_union.data()["user"]["open_id"], seed.p2p_peer);
    let nobody = api.get(&path(scopes::USER, &["ou_nobody"]), &[]).await;
    assert_eq!(nobody.status, 400);
    let too_big = api
        .get(
            scopes::USER_SEARCH,
            &[("query", "张"), ("page_size", "201")],
        )
        .await;
    assert_eq!(too_big.status, 400);
}

#[tokio::test]
async fn a_drive_folder_pages_with_next_page_token() {
    let api = Api::new().await;
    let seed = api.emulator.seed();
    let mut sizes = Vec::new();
    let mut token: Option<String> = None;
    let mut last_modified = i64::MAX;
    loop {
        let mut query = vec![("folder_token", seed.archive_folder_token.as_str())];
        if let Some(token) = &token {
            query.push(("page_token", token));
        }
        let page = api.get(scopes::DRIVE_FILES, &query).await;
        let data = page.data().clone();
        assert!(
            data.get("page_token").is_none(),
            "the drive answers next_page_token"
        );
        let files = data["files"].as_array().unwrap();
        sizes.push(files.len());
        for file in files {
            let modified: i64 = file["modified_time"].as_str().unwrap().parse().unwrap();
            assert!(modified <= last_modified, "EditedTime DESC by default");
            last_modified = modified;
            assert_eq!(file["parent_token"], seed.archive_folder_token);
        }
        if data["has_more"] == false {
            assert!(data.get("next_page_token").is_none());
            break;
        }
        token = Some(data["next_page_token"].as_str().unwrap().to_owned());
    }
    assert_eq!(sizes, [100, 100, 30]);
    assert_eq!(sizes.iter().sum::<usize>(), seed.archive_files);
    let big = api
        .get(
            scopes::DRIVE_FILES,
            &[
                ("folder_token", &seed.archive_folder_token),
                ("page_size", "200"),
            ],
        )
        .await;
    assert_eq!(big.data()["files"].as_array().unwrap().len(), 200);
    let too_big = api
        .get(
            scopes::DRIVE_FILES,
            &[
                ("folder_token", &seed.archive_folder_token),
                ("page_size", "201"),
            ],
        )
        .await;
    assert_eq!((too_big.status, too_big.code()), (400, 1064001));
    let root = api.get(scopes::DRIVE_FILES, &[]).await;
    let root = root.data().clone();
    assert_eq!(root["has_more"], false);
    let names: Vec<&str> = root["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"项目归档") && names.contains(&"v2.3 产品需求文档（PRD）"));
    let missing = api
        .get(scopes::DRIVE_FILES, &[("folder_token", "fldcnNope")])
        .await;
    assert_eq!(missing.status, 404);
}

#[tokio::test]
async fn one_message_one_task_and_a_documents_metadata() {
    let api = Api::new().await;
    let seed = api.emulator.seed();
    let history = api
        .get(
            scopes::MESSAGES,
            &[
                ("container_id_type", "chat"),
                ("container_id", &seed.p2p_chat_id),
            ],
        )
        .await;
    let first = history.data()["items"][0].clone();
    let one = api
        .get(
            &path(scopes::MESSAGE, &[first["message_id"].as_str().unwrap()]),
            &[],
        )
        .await;
    assert_eq!(one.data()["items"], json!([first]));
    let none = api.get(&path(scopes::MESSAGE, &["om_nope"]), &[]).await;
    assert_eq!(none.code(), 230001);

    let task = api
        .get(&path(scopes::TASK, &[&seed.open_task_guid]), &[])
        .await;
    assert_eq!(task.data()["task"]["summary"], "整理 v2.3 需求评审意见");
    let none = api.get(&path(scopes::TASK, &["nope"]), &[]).await;
    assert_eq!((none.status, none.code()), (404, 1470404));

    let document = api
        .get(&path(scopes::DOCUMENT, &[&seed.prd_document_id]), &[])
        .await;
    assert_eq!(
        document.data()["document"]["title"],
        "v2.3 产品需求文档（PRD）"
    );
    assert!(document.data()["document"]["revision_id"].is_i64());
    let none = api.get(&path(scopes::DOCUMENT, &["nope"]), &[]).await;
    assert_eq!((none.status, none.code()), (404, 1770002));
}

// --- scopes and tokens --------------------------------------------------------------------

#[tokio::test]
async fn every_endpoint_names_every_alternative_of_the_scope_it_lacks() {
    let api = Api::new().await;
    let seed = api.emulator.seed();
    let bare = api.emulator.issue_token(APP, &["offline_access"]);
    for endpoint in ENDPOINTS {
        let filled = path(endpoint.route, &["x", "y"]);
        let query: Vec<(&str, &str)> =
            if endpoint.route == scopes::MESSAGES && endpoint.method == "GET" {
                vec![
                    ("container_id_type", "chat"),
                    ("container_id", &seed.product_chat_id),
                ]
            } else {
                Vec::new()
            };
        let body = (endpoint.method != "GET" && endpoint.method != "DELETE").then(|| json!({}));
        let answer = api
            .call_as(Some(&bare), endpoint.method, &filled, &query, body)
            .await;
        // Real Feishu lists every scope that satisfies the first requirement the token fails.
        let expected: Vec<&str> = endpoint.scopes[0].to_vec();
        assert!(expected.contains(&preferred_scope(endpoint.scopes[0])));
        assert_eq!(
            (answer.status, answer.code()),
            (400, 99991679),
            "{} {}",
            endpoint.method,
            endpoint.route
        );
        assert_eq!(
            answer.violations(),
            expected,
            "{} {}",
            endpoint.method,
            endpoint.route
        );
    }
    assert_eq!(ENDPOINTS.len(), 30);
}

#[tokio::test]
async fn a_scope_the_app_never_enabled_answers_99991672() {
    let api = Api::new().await;
    api.emulator.register_app(App {
        app_id: "cli_limited".into(),
        app_secret: "s".into(),
        redirect_uris: Vec::new(),
        enabled_scopes: vec![
            "calendar:calendar:readonly".into(),
            "task:task:write".into(),
        ],
    });
    let token = api
        .emulator
        .issue_token("cli_limited", &["calendar:calendar:readonly"]);
    let tasks = api
        .call_as(Some(&token), "GET", scopes::TASKS, &[], None)
        .await;
    assert_eq!(
        (tasks.status, tasks.code()),
        (400, 99991679),
        "enabled via task:task:write"
    );
    let docs = api
        .call_as(
            Some(&token),
            "POST",
            scopes::DOC_SEARCH,
            &[],
            Some(json!({})),
        )
        .await;
    assert_eq!((docs.status, docs.code()), (400, 99991672));
    assert_eq!(docs.violations(), ["search:docs:read"]);
    assert_eq!(
        docs.body["error"]["permission_violations"][0]["type"],
        "action_scope_required"
    );
    assert!(
        docs.body["msg"]
            .as_str()
            .unwrap()
            .contains("search:docs:read")
    );
    let calendar = api
        .call_as(
            Some(&token),
            "POST",
            scopes::PRIMARY_CALENDAR,
            &[],
            Some(json!({})),
        )
        .await;
    assert_eq!(calendar.status, 200);
}

#[tokio::test]
async fn expired_unknown_and_missing_tokens() {
    let api = Api::new().await;
    let answer = api
        .call_as(Some("eyJnot-a-token"), "GET", scopes::CHATS, &[], None)
        .await;
    assert_eq!((answer.status, answer.code()), (401, 99991668));
    let answer = api.call_as(None, "GET", scopes::CHATS, &[], None).await;
    assert_eq!((answer.status, answer.code()), (400, 99991661));
    assert_eq!(api.get(scopes::CHATS, &[]).await.status, 200);
    api.emulator.expire_access_tokens();
    let answer = api.get(scopes::CHATS, &[]).await;
    assert_eq!((answer.status, answer.code()), (401, 99991677));
    assert_eq!(answer.body["msg"], "token expired");
    assert!(answer.header("x-tt-logid").is_some());
}

#[tokio::test]
async fn a_token_from_the_sign_in_flow_carries_its_grants() {
    let api = Api::new().await;
    let redirect = "http://127.0.0.1:9/callback";
    api.emulator.register_app(App {
        app_id: "cli_signed_in".into(),
        app_secret: "secret".into(),
        redirect_uris: vec![redirect.into()],
        enabled_scopes: vec!["task:task:read".into(), "im:chat:readonly".into()],
    });
    let page = api
        .call_as(
            None,
            "GET",
            "/open-apis/authen/v1/authorize",
            &[
                ("client_id", "cli_signed_in"),
                ("response_type", "code"),
                ("redirect_uri", redirect),
                ("scope", "task:task:read"),
            ],
            None,
        )
        .await;
    let html = page.body.as_str().unwrap();
    let marker = "name=\"request_id\" value=\"";
    let start = html.find(marker).unwrap() + marker.len();
    let request_id = &html[start..start + html[start..].find('"').unwrap()];
    let decided = api
        .http
        .post(format!(
            "{}/open-apis/authen/v1/authorize/decision",
            api.emulator.base_url()
        ))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("request_id={request_id}&decision=allow"))
        .send()
        .await
        .unwrap();
    let location = decided.headers()["location"].to_str().unwrap().to_owned();
    let code = url::Url::parse(&location)
        .unwrap()
        .query_pairs()
        .find(|(k, _)| k == "code")
        .unwrap()
        .1
        .into_owned();
    let token: Value = api
        .http
        .post(format!(
            "{}/open-apis/authen/v2/oauth/token",
            api.emulator.base_url()
        ))
        .json(
            &json!({"grant_type": "authorization_code", "client_id": "cli_signed_in",
                      "client_secret": "secret", "code": code, "redirect_uri": redirect}),
        )
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let access = token["access_token"].as_str().unwrap();
    let tasks = api
        .call_as(Some(access), "GET", scopes::TASKS, &[], None)
        .await;
    assert_eq!(tasks.status, 200);
    let chats = api
        .call_as(Some(access), "GET", scopes::CHATS, &[], None)
        .await;
    assert_eq!(chats.code(), 99991679, "enabled but not granted");
    assert_eq!(
        chats.violations(),
        [
            "im:chat",
            "im:chat:readonly",
            "im:chat:read",
            "im:chat.group_info:readonly"
        ]
    );
}

// --- rate limits, faults and the log ------------------------------------------------------

#[tokio::test]
async fn overflowing_a_rate_limit_answers_429_with_the_reset_headers() {
    let api = Api::new().await;
    api.emulator.set_rate_limit(
        "GET",
        scopes::TASKS,
        RateLimit::new(2, Duration::from_secs(60)),
    );
    assert_eq!(api.get(scopes::TASKS, &[]).await.status, 200);
    assert_eq!(api.get(scopes::TASKS, &[]).await.status, 200);
    let limited = api.get(scopes::TASKS, &[]).await;
    assert_eq!((limited.status, limited.code()), (429, 99991400));
    assert_eq!(limited.body["msg"], "request trigger frequency limit");
    assert_eq!(limited.header("x-ogw-ratelimit-limit"), Some("2"));
    let reset: u64 = limited
        .header("x-ogw-ratelimit-reset")
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=60).contains(&reset), "{reset}");
    assert!(limited.header("x-tt-logid").is_some());
    assert_eq!(
        api.get(scopes::CHATS, &[]).await.status,
        200,
        "per endpoint"
    );
    let other_app = api.emulator.issue_token("cli_other", &["task:task:read"]);
    let other = api
        .call_as(Some(&other_app), "GET", scopes::TASKS, &[], None)
        .await;
    assert_eq!(other.status, 200, "per app");

    api.emulator.set_rate_limit(
        "POST",
        scopes::DOCUMENTS,
        RateLimit::new(1, Duration::from_millis(300)).with_status(400),
    );
    assert_eq!(
        api.post(scopes::DOCUMENTS, &[], json!({})).await.status,
        200
    );
    let legacy = api.post(scopes::DOCUMENTS, &[], json!({})).await;
    assert_eq!((legacy.status, legacy.code()), (400, 99991400));
    tokio::time::sleep(Duration::from_millis(350)).await;
    assert_eq!(
        api.post(scopes::DOCUMENTS, &[], json!({})).await.status,
        200,
        "the window reset"
    );
    api.emulator.clear_rate_limits();
    assert_eq!(api.get(scopes::TASKS, &[]).await.status, 200);
}

#[tokio::test]
async fn injected_server_errors_rate_limits_and_expired_tokens() {
    let api = Api::new().await;
    api.emulator
        .inject_fault(Fault::server_error(503).on(scopes::TASKS).times(2));
    for _ in 0..2 {
        let failed = api.get(scopes::TASKS, &[]).await;
        assert_eq!(failed.status, 503);
        assert!(failed.header("x-tt-logid").is_some());
    }
    assert_eq!(
        api.get(scopes::CHATS, &[]).await.status,
        200,
        "only that path"
    );
    assert_eq!(api.get(scopes::TASKS, &[]).await.status, 200, "used up");

    api.emulator.inject_fault(Fault::rate_limited(7));
    let limited = api.get(scopes::CHATS, &[]).await;
    assert_eq!((limited.status, limited.code()), (429, 99991400));
    assert_eq!(limited.header("x-ogw-ratelimit-reset"), Some("7"));
    assert!(limited.header("x-ogw-ratelimit-limit").is_some());

    let seed = api.emulator.seed();
    api.emulator
        .inject_fault(Fault::server_error(500).on(&path(scopes::CHAT, &[&seed.product_chat_id])));
    let concrete = api
        .get(&path(scopes::CHAT, &[&seed.product_chat_id]), &[])
        .await;
    assert_eq!(concrete.status, 500);

    api.emulator
        .inject_fault(Fault::slow(Duration::from_millis(300)).on(scopes::CHATS));
    let started = Instant::now();
    assert_eq!(api.get(scopes::CHATS, &[]).await.status, 200);
    assert!(started.elapsed() >= Duration::from_millis(300));

    api.emulator.inject_fault(Fault::expire_token());
    let expired = api.get(scopes::CHATS, &[]).await;
    assert_eq!((expired.status, expired.code()), (401, 99991677));
    assert_eq!(
        api.get(scopes::CHATS, &[]).await.code(),
        99991677,
        "it stays expired"
    );
}

#[tokio::test]
async fn faults_through_the_control_endpoint() {
    let api = Api::new().await;
    let added = api
        .call_as(
            None,
            "POST",
            "/_emulator/faults",
            &[],
            Some(json!([
                {"kind": "server_error", "status": 502, "path": scopes::MESSAGES, "times": 1},
                {"kind": "rate_limited", "reset_secs": 3, "path": scopes::TASKS},
            ])),
        )
        .await;
    assert_eq!(added.body["added"], 2);
    let chat = api.emulator.seed().release_chat_id;
    let failed = api
        .post(
            scopes::MESSAGES,
            &[("receive_id_type", "chat_id")],
            message(&chat, "重试测试", "f-1"),
        )
        .await;
    assert_eq!(failed.status, 502);
    assert!(
        api.emulator.messages_created_in(&chat).is_empty(),
        "nothing was sent"
    );
    let retried = api
        .post(
            scopes::MESSAGES,
            &[("receive_id_type", "chat_id")],
            message(&chat, "重试测试", "f-1"),
        )
        .await;
    assert_eq!(retried.status, 200);
    assert_eq!(api.emulator.messages_created_in(&chat).len(), 1);
    let cleared = api
        .call_as(None, "DELETE", "/_emulator/faults", &[], None)
        .await;
    assert_eq!(cleared.status, 204);
    assert_eq!(api.get(scopes::TASKS, &[]).await.status, 200, "cleared");
    let bad = api
        .call_as(
            None,
            "POST",
            "/_emulator/faults",
            &[],
            Some(json!({"kind": "meteor"})),
        )
        .await;
    assert_eq!(bad.status, 400);
}

#[tokio::test]
async fn the_request_log_marks_writes_and_answers() {
    let api = Api::new().await;
    let chat = api.emulator.seed().release_chat_id;
    api.get(scopes::CHATS, &[]).await;
    api.post(
        scopes::MESSAGES,
        &[("receive_id_type", "chat_id")],
        message(&chat, "日志测试", "log-1"),
    )
    .await;
    let expired = api.emulator.issue_token(APP, &[]);
    api.call_as(Some(&expired), "GET", scopes::CHATS, &[], None)
        .await;
    let log = api.emulator.requests();
    let read = log.iter().find(|r| r.path == scopes::CHATS).unwrap();
    assert!(!read.write);
    assert_eq!((read.status, read.code), (Some(200), Some(0)));
    let sent = log.iter().find(|r| r.path == scopes::MESSAGES).unwrap();
    assert_eq!(sent.method, "POST");
    assert!(sent.write);
    assert_eq!(sent.idempotency_key.as_deref(), Some("log-1"));
    assert_eq!(sent.route.as_deref(), Some(scopes::MESSAGES));
    let refused = log.last().unwrap();
    assert_eq!((refused.status, refused.code), (Some(400), Some(99991679)));
    let served = api
        .call_as(None, "GET", "/_emulator/requests", &[], None)
        .await;
    assert_eq!(served.body.as_array().unwrap().len(), log.len());
    assert_eq!(api.emulator.count(scopes::MESSAGES, None), 1);
}
