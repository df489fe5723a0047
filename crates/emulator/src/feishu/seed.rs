//! The demo tenant, 星云科技: a dozen people, their chats with history, the demo user's calendar
//! with recurring meetings, documents and wiki pages, tasks and a drive with enough files to
//! page through.
//!
//! Ids are derived from fixed names, so they are the same in every run; times are laid out
//! relative to the week the emulator starts in (Monday 00:00, Asia/Shanghai), so "this week" and
//! "next week" always have meetings. [`SeedIds`] hands the interesting ids to tests.

use std::collections::HashMap;

use serde::Serialize;
use sha2::{Digest as _, Sha256};

use super::api::docs;
use super::datetime::{DAY, TIME_ZONE, local_day, local_midnight, weekday};
use super::demo_user;
use super::tenant::{
    Attendee, Chat, Document, DriveFile, Event, EventTime, Message, Person, Task, Tenant, WikiNode,
};

/// A person of the seed, for tests.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SeedPerson {
    /// 中文名.
    pub name: String,
    /// English name.
    pub en_name: String,
    /// `ou_…`.
    pub open_id: String,
}

/// The seed's ids, for tests. They do not change between runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SeedIds {
    /// The tenant key every answer carries.
    pub tenant_key: String,
    /// The signed-in demo user's open_id (林晓).
    pub demo_user: String,
    /// Everyone in the directory, the demo user first.
    pub people: Vec<SeedPerson>,
    /// The demo user's primary calendar.
    pub calendar_id: String,
    /// 每日站会: weekdays 09:30–09:45, `FREQ=DAILY;BYDAY=MO,TU,WE,TH,FR`.
    pub standup_event_id: String,
    /// 产品研发周会: Mondays 14:00–15:00, `FREQ=WEEKLY;BYDAY=MO`.
    pub weekly_meeting_event_id: String,
    /// v2.3 需求评审: this Tuesday 10:00–11:30, five attendees.
    pub review_event_id: String,
    /// 与张伟 1:1: this Friday 11:00, organised by 张伟.
    pub one_on_one_event_id: String,
    /// Q3 季度复盘: next Tuesday 14:00–16:00.
    pub quarterly_review_event_id: String,
    /// 公司团建: next Friday, all day.
    pub team_building_event_id: String,
    /// 星云科技全员群: 128 members (a "high-risk" recipient).
    pub all_hands_chat_id: String,
    /// 产品研发部: 8 members and [`SeedIds::product_chat_messages`] messages of history.
    pub product_chat_id: String,
    /// How many messages the product chat's history holds (more than one page of 50).
    pub product_chat_messages: usize,
    /// v2.3 发布小组: 4 members.
    pub release_chat_id: String,
    /// 周三羽毛球: 5 members.
    pub badminton_chat_id: String,
    /// 市场合作对接: 4 members.
    pub market_chat_id: String,
    /// The 1:1 chat with 张伟.
    pub p2p_chat_id: String,
    /// 张伟's open_id (the other side of the 1:1 chat).
    pub p2p_peer: String,
    /// 《v2.3 产品需求文档（PRD）》, a docx with Markdown content.
    pub prd_document_id: String,
    /// 《产品研发周会纪要》.
    pub meeting_notes_document_id: String,
    /// The wiki space 团队知识库.
    pub wiki_space_id: String,
    /// The wiki node 新员工入职指南.
    pub onboarding_wiki_node: String,
    /// The document behind that wiki node.
    pub onboarding_document_id: String,
    /// An open task assigned to the demo user (整理 v2.3 需求评审意见).
    pub open_task_guid: String,
    /// A completed task of the demo user (提交差旅报销单).
    pub completed_task_guid: String,
    /// A task the demo user created for 李娜 (not in "my tasks").
    pub delegated_task_guid: String,
    /// 项目归档: a folder of [`SeedIds::archive_files`] files (three pages at the default size).
    pub archive_folder_token: String,
    /// How many files the archive folder holds.
    pub archive_files: usize,
    /// 设计稿: a folder of a dozen files.
    pub design_folder_token: String,
    /// The Base 需求池 (多维表格).
    pub base_app_token: String,
    /// Its table 需求: fields 标题 (text), 状态 (single select) and 估分 (number), three records.
    pub base_table_id: String,
}

impl SeedIds {
    /// The open_id of the person called `name` (中文名 or English name).
    pub fn open_id_of(&self, name: &str) -> Option<&str> {
        self.people
            .iter()
            .find(|p| p.name == name || p.en_name == name)
            .map(|p| p.open_id.as_str())
    }
}

/// Lowercase hex of the SHA-256 of `seed`, cut to `len`: a stable id.
fn hex_id(seed: &str, len: usize) -> String {
    let digest = Sha256::digest(seed.as_bytes());
    let mut out = String::with_capacity(64);
    for byte in digest {
        out.push_str(&format!("{byte:02x}"));
    }
    out.truncate(len);
    out
}

/// A stable token in `[0-9A-Za-z]` of `len` characters (docx, wiki and drive tokens look so).
fn token_id(seed: &str, len: usize) -> String {
    const ALPHABET: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let mut out = String::with_capacity(len);
    let mut round = 0u32;
    while out.len() < len {
        for byte in Sha256::digest(format!("{seed}#{round}").as_bytes()) {
            if out.len() < len {
                out.push(char::from(ALPHABET[usize::from(byte) % ALPHABET.len()]));
            }
        }
        round += 1;
    }
    out
}

/// A stable UUID-shaped id (events, tasks).
fn uuid_id(seed: &str) -> String {
    let hex = hex_id(seed, 32);
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// (key, 中文名, English name, job title, department, city)
const PEOPLE: &[(&str, &str, &str, &str, &str, &str)] = &[
    (
        "zhangwei",
        "张伟",
        "Zhang Wei",
        "研发负责人",
        "研发部",
        "北京",
    ),
    (
        "wangfang",
        "王芳",
        "Wang Fang",
        "资深设计师",
        "设计部",
        "北京",
    ),
    ("lina", "李娜", "Li Na", "前端工程师", "研发部", "上海"),
    (
        "liuyang",
        "刘洋",
        "Liu Yang",
        "后端工程师",
        "研发部",
        "北京",
    ),
    (
        "chenjing",
        "陈静",
        "Chen Jing",
        "测试工程师",
        "质量部",
        "杭州",
    ),
    (
        "yangfan",
        "杨帆",
        "Yang Fan",
        "运维工程师",
        "研发部",
        "北京",
    ),
    (
        "zhangxiaoming",
        "张晓明",
        "Zhang Xiaoming",
        "后端工程师",
        "研发部",
        "北京",
    ),
    ("zhaomin", "赵敏", "Zhao Min", "市场经理", "市场部", "上海"),
    (
        "huangting",
        "黄婷",
        "Huang Ting",
        "HRBP",
        "人力资源部",
        "北京",
    ),
    ("zhoujie", "周杰", "Zhou Jie", "销售总监", "销售部", "深圳"),
    ("wulei", "吴磊", "Wu Lei", "财务经理", "财务部", "北京"),
    ("sunyue", "孙悦", "Sun Yue", "运营专员", "运营部", "广州"),
];

/// The tenant key, as the OAuth side's `user_info` reports it.
pub(crate) const TENANT_KEY: &str = "demo_tenant";

struct Builder {
    /// Unix seconds of Monday 00:00 (local) of the current week.
    week: i64,
    now_ms: i64,
    people: HashMap<&'static str, String>,
    tenant: Tenant,
}

impl Builder {
    fn id(&self, key: &str) -> String {
        self.people.get(key).cloned().unwrap_or_default()
    }

    /// Local time `day` days after this week's Monday at `hour:minute`.
    fn at(&self, day: i64, hour: i64, minute: i64) -> i64 {
        self.week + day * DAY + hour * 3600 + minute * 60
    }
}

/// Builds the demo tenant as of `now_ms`.
pub(crate) fn build(now_ms: i64) -> (Tenant, SeedIds) {
    let now = now_ms.div_euclid(1000);
    let today = local_day(now);
    let monday = today - i64::from(weekday(today));
    let mut b = Builder {
        week: local_midnight(monday),
        now_ms,
        people: HashMap::new(),
        tenant: Tenant {
            tenant_key: TENANT_KEY.to_owned(),
            people: Vec::new(),
            chats: Vec::new(),
            messages: Vec::new(),
            calendar_id: format!(
                "feishu.cn_{}@group.calendar.feishu.cn",
                token_id("calendar:linxiao", 22)
            ),
            calendar_summary: "林晓".to_owned(),
            events: Vec::new(),
            documents: Vec::new(),
            wiki_nodes: Vec::new(),
            tasks: Vec::new(),
            files: Vec::new(),
            bases: Vec::new(),
            root_folder: String::new(),
            event_keys: HashMap::new(),
            message_uuids: HashMap::new(),
            task_tokens: HashMap::new(),
            block_tokens: HashMap::new(),
        },
    };
    seed_people(&mut b);
    let chats = seed_chats(&mut b);
    let events = seed_events(&mut b);
    let docs = seed_documents(&mut b);
    let tasks = seed_tasks(&mut b);
    let folders = seed_drive(&mut b, &docs);
    let base = super::api::bitable::data::seed(token_id);
    let base_app_token = base.app_token.clone();
    let base_table_id = base
        .tables
        .first()
        .map(|t| t.table_id.clone())
        .unwrap_or_default();
    b.tenant.bases.push(base);
    let ids = SeedIds {
        tenant_key: TENANT_KEY.to_owned(),
        demo_user: b.id("linxiao"),
        people: b
            .tenant
            .people
            .iter()
            .map(|p| SeedPerson {
                name: p.name.clone(),
                en_name: p.en_name.clone(),
                open_id: p.open_id.clone(),
            })
            .collect(),
        calendar_id: b.tenant.calendar_id.clone(),
        standup_event_id: events.standup,
        weekly_meeting_event_id: events.weekly,
        review_event_id: events.review,
        one_on_one_event_id: events.one_on_one,
        quarterly_review_event_id: events.quarterly,
        team_building_event_id: events.team_building,
        all_hands_chat_id: chats.all_hands,
        product_chat_id: chats.product,
        product_chat_messages: chats.product_messages,
        release_chat_id: chats.release,
        badminton_chat_id: chats.badminton,
        market_chat_id: chats.market,
        p2p_chat_id: chats.p2p,
        p2p_peer: b.id("zhangwei"),
        prd_document_id: docs.prd.clone(),
        meeting_notes_document_id: docs.notes.clone(),
        wiki_space_id: docs.space.clone(),
        onboarding_wiki_node: docs.onboarding_node.clone(),
        onboarding_document_id: docs.onboarding.clone(),
        open_task_guid: tasks.open,
        completed_task_guid: tasks.completed,
        delegated_task_guid: tasks.delegated,
        archive_folder_token: folders.archive,
        archive_files: folders.archive_files,
        design_folder_token: folders.design,
        base_app_token,
        base_table_id,
    };
    (b.tenant, ids)
}

fn seed_people(b: &mut Builder) {
    let demo = demo_user();
    let demo_person = Person {
        name: demo.name,
        en_name: demo.en_name,
        open_id: demo.open_id,
        union_id: demo.union_id,
        user_id: hex_id("user_id:linxiao", 8),
        email: "linxiao@demo-corp.cn".to_owned(),
        job_title: "产品经理".to_owned(),
        department_id: format!("od-{}", hex_id("dept:产品部", 32)),
        city: "北京".to_owned(),
        employee_no: "XY0007".to_owned(),
        join_time: 1_625_097_600,
    };
    b.people.insert("linxiao", demo_person.open_id.clone());
    b.tenant.people.push(demo_person);
    for (index, (key, name, en_name, title, dept, city)) in PEOPLE.iter().enumerate() {
        let person = Person {
            name: (*name).to_owned(),
            en_name: (*en_name).to_owned(),
            open_id: format!("ou_{}", hex_id(&format!("open_id:{key}"), 32)),
            union_id: format!("on_{}", hex_id(&format!("union_id:{key}"), 32)),
            user_id: hex_id(&format!("user_id:{key}"), 8),
            email: format!("{key}@demo-corp.cn"),
            job_title: (*title).to_owned(),
            department_id: format!("od-{}", hex_id(&format!("dept:{dept}"), 32)),
            city: (*city).to_owned(),
            employee_no: format!("XY{:04}", 11 + index * 3),
            join_time: 1_561_939_200 + i64::try_from(index).unwrap_or(0) * 2_592_000,
        };
        b.people.insert(key, person.open_id.clone());
        b.tenant.people.push(person);
    }
}

struct ChatIds {
    all_hands: String,
    product: String,
    product_messages: usize,
    release: String,
    badminton: String,
    market: String,
    p2p: String,
}

fn seed_chats(b: &mut Builder) -> ChatIds {
    let chat_created = b.week - 400 * DAY;
    let chat = |b: &mut Builder,
                key: &str,
                name: &str,
                description: &str,
                owner: &str,
                members: &[&str],
                extra: usize,
                p2p: bool,
                age_days: i64| {
        let chat_id = format!("oc_{}", hex_id(&format!("chat:{key}"), 32));
        let members = members.iter().map(|m| b.id(m)).collect();
        b.tenant.chats.push(Chat {
            chat_id: chat_id.clone(),
            name: name.to_owned(),
            description: description.to_owned(),
            p2p,
            owner: b.id(owner),
            members,
            extra_members: extra,
            created_at: (chat_created + age_days * DAY) * 1000,
        });
        chat_id
    };
    let everyone: Vec<&str> = std::iter::once("linxiao")
        .chain(PEOPLE.iter().map(|p| p.0))
        .collect();
    let all_hands = chat(
        b,
        "all-hands",
        "星云科技全员群",
        "公司通知与公告，请勿闲聊",
        "huangting",
        &everyone,
        128 - everyone.len(),
        false,
        0,
    );
    let product_members = [
        "linxiao",
        "zhangwei",
        "wangfang",
        "lina",
        "liuyang",
        "chenjing",
        "yangfan",
        "zhangxiaoming",
    ];
    let product = chat(
        b,
        "product",
        "产品研发部",
        "产品、设计、研发、测试日常沟通",
        "zhangwei",
        &product_members,
        0,
        false,
        30,
    );
    let release = chat(
        b,
        "release-2.3",
        "v2.3 发布小组",
        "v2.3 版本发布协调",
        "linxiao",
        &["linxiao", "zhangwei", "liuyang", "chenjing"],
        0,
        false,
        350,
    );
    let badminton = chat(
        b,
        "badminton",
        "周三羽毛球",
        "每周三晚 7 点，奥体中心 3 号场",
        "wangfang",
        &["linxiao", "wangfang", "zhaomin", "zhoujie", "sunyue"],
        0,
        false,
        120,
    );
    let market = chat(
        b,
        "market",
        "市场合作对接",
        "产品与市场、销售的合作事项",
        "zhaomin",
        &["linxiao", "zhaomin", "zhoujie", "sunyue"],
        0,
        false,
        200,
    );
    let p2p = chat(
        b,
        "p2p:linxiao:zhangwei",
        "",
        "",
        "linxiao",
        &["linxiao", "zhangwei"],
        0,
        true,
        10,
    );

    let now = b.now_ms;
    let say = |b: &mut Builder, chat_id: &str, n: usize, sender: &str, text: &str, ago_min: i64| {
        let content = serde_json::json!({ "text": text }).to_string();
        b.tenant.messages.push(Message {
            message_id: format!("om_{}", hex_id(&format!("message:{chat_id}:{n}"), 32)),
            chat_id: chat_id.to_owned(),
            sender: b.id(sender),
            msg_type: "text".to_owned(),
            content,
            create_time: now - ago_min * 60_000,
            root_id: None,
            parent_id: None,
            thread_id: None,
            via_api: false,
            by_app: false,
            updated_at: None,
        });
    };

    let announcements: &[(&str, &str, i64)] = &[
        (
            "huangting",
            "【通知】本周五下午 3 点在 6F 大会议室召开全员月度沟通会，请大家准时参加。",
            6 * 24 * 60,
        ),
        (
            "wulei",
            "提醒：本月差旅报销请在 25 号前提交，逾期顺延到下月处理。",
            5 * 24 * 60,
        ),
        (
            "huangting",
            "欢迎新同事张晓明加入研发部！🎉",
            4 * 24 * 60 + 120,
        ),
        (
            "zhoujie",
            "好消息：华星科技的年度合同已经签约，感谢大家的支持！",
            3 * 24 * 60,
        ),
        (
            "yangfan",
            "今晚 22:00–23:00 机房网络维护，期间 VPN 可能短暂中断。",
            2 * 24 * 60 + 300,
        ),
        (
            "sunyue",
            "公司团建报名表已发到邮箱，下周三截止，欢迎大家报名。",
            2 * 24 * 60,
        ),
        (
            "zhaomin",
            "市场部本周上线了新版官网，欢迎大家体验并反馈问题。",
            26 * 60,
        ),
        (
            "huangting",
            "【通知】下周一起新的考勤制度生效，详见人事共享文件夹。",
            3 * 60,
        ),
    ];
    for (n, (sender, text, ago)) in announcements.iter().enumerate() {
        say(b, &all_hands, n, sender, text, *ago);
    }

    let product_lines: &[(&str, &str)] = &[
        ("zhangwei", "早，今天站会改到 9:45，我这边有个面试。"),
        ("lina", "收到。首页改版的前端已经提测了。"),
        ("chenjing", "提测收到，下午开始回归。"),
        (
            "wangfang",
            "设计稿更新了，主要改了空状态和加载态，链接在 PRD 里。",
        ),
        ("liuyang", "订单导出接口的分页问题修好了，已合入 develop。"),
        (
            "linxiao",
            "辛苦！v2.3 需求评审定在周二上午 10 点，大家提前看一下 PRD。",
        ),
        ("zhangxiaoming", "我第一周先熟悉代码，有问题会多请教大家 🙏"),
        ("yangfan", "测试环境今晚 8 点重启，期间不可用。"),
        (
            "chenjing",
            "发现一个问题：iOS 上日期选择器会跳到 1970 年，已提 bug。",
        ),
        ("lina", "我看一下，应该是时区转换的问题。"),
        (
            "zhangwei",
            "性能监控显示列表页 P95 涨到 1.8 秒了，刘洋帮忙看下慢查询。",
        ),
        ("liuyang", "好的，初步看是缺了一个联合索引。"),
        (
            "linxiao",
            "华星科技希望导出支持 Excel 格式，这个放进 v2.3 还是 v2.4？",
        ),
        ("zhangwei", "工作量不大，可以放 v2.3，但要砍掉批量编辑。"),
        ("wangfang", "批量编辑的设计我先留着，v2.4 再用。"),
        ("chenjing", "回归完成，剩 3 个 P2 的问题，不阻塞发布。"),
        ("lina", "日期选择器的问题修复了，麻烦再验证一下。"),
        ("yangfan", "灰度发布脚本已经准备好，默认 10% 流量。"),
        ("linxiao", "本周周会的纪要已经发到文档里了。"),
        ("zhangxiaoming", "我把 README 里的本地启动步骤更新了一下。"),
        ("liuyang", "索引加上了，列表页 P95 降到 600ms。"),
        ("zhangwei", "👍 大家辛苦，周五下午一起过一下发布清单。"),
    ];
    let product_messages = 65;
    for n in 0..product_messages {
        let (sender, text) = product_lines[n % product_lines.len()];
        let round = n / product_lines.len();
        let text = if round == 0 {
            text.to_owned()
        } else {
            format!("{text}（第 {} 轮迭代）", round + 1)
        };
        let ago = i64::try_from(product_messages - n).unwrap_or(0) * 47;
        say(b, &product, n, sender, &text, ago);
    }

    let release_lines: &[(&str, &str, i64)] = &[
        ("linxiao", "v2.3 发布时间暂定下周四晚上 8 点。", 3 * 24 * 60),
        ("zhangwei", "可以，发布前一天冻结代码。", 3 * 24 * 60 - 20),
        ("liuyang", "数据库迁移脚本我今天写完。", 2 * 24 * 60),
        (
            "chenjing",
            "回归用例已经整理好了，共 142 条。",
            2 * 24 * 60 - 60,
        ),
        ("linxiao", "发布说明我来写，明天发群里确认。", 30 * 60),
        ("zhangwei", "回滚方案也写进去。", 29 * 60),
        ("liuyang", "迁移脚本在预发环境跑过了，耗时 4 分钟。", 5 * 60),
        ("chenjing", "预发验证通过 ✅", 2 * 60),
        (
            "linxiao",
            "发布说明初稿：https://demo-corp.feishu.cn/docx/release-notes-v2-3",
            90,
        ),
        ("zhangwei", "看过了，没问题。", 60),
    ];
    for (n, (sender, text, ago)) in release_lines.iter().enumerate() {
        say(b, &release, n, sender, text, *ago);
    }

    let badminton_lines: &[(&str, &str, i64)] = &[
        ("wangfang", "这周三照常，场地订好了 3 号场。", 4 * 24 * 60),
        ("zhoujie", "我带新球。", 4 * 24 * 60 - 30),
        ("zhaomin", "我这周出差，请假一次 😂", 3 * 24 * 60),
        ("sunyue", "+1，我可以去。", 2 * 24 * 60),
        ("linxiao", "我也去，晚点到。", 2 * 24 * 60 - 10),
        ("wangfang", "好，7 点见！", 24 * 60),
    ];
    for (n, (sender, text, ago)) in badminton_lines.iter().enumerate() {
        say(b, &badminton, n, sender, text, *ago);
    }

    let market_lines: &[(&str, &str, i64)] = &[
        (
            "zhaomin",
            "下个月的行业展会需要一份产品演示，林晓能帮忙准备吗？",
            5 * 24 * 60,
        ),
        ("linxiao", "可以，我先列一下演示脚本。", 5 * 24 * 60 - 45),
        (
            "zhoujie",
            "华星科技想在合同里加一个定制报表，需求我整理后发给你。",
            2 * 24 * 60,
        ),
        ("sunyue", "官网的客户案例页需要两张产品截图。", 24 * 60),
        ("linxiao", "截图明天给你。", 23 * 60),
    ];
    for (n, (sender, text, ago)) in market_lines.iter().enumerate() {
        say(b, &market, n, sender, text, *ago);
    }

    let p2p_lines: &[(&str, &str, i64)] = &[
        ("zhangwei", "周五的 1:1 想聊一下 Q3 的规划。", 2 * 24 * 60),
        ("linxiao", "好的，我准备一下路线图。", 2 * 24 * 60 - 5),
        ("zhangwei", "另外刘洋那边想转做架构，你怎么看？", 24 * 60),
        (
            "linxiao",
            "我觉得可以，他对性能优化很有想法。",
            24 * 60 - 12,
        ),
        ("zhangwei", "那周五一起聊。", 24 * 60 - 15),
        ("zhangwei", "PRD 里的导出格式我留了评论，有空看下。", 40),
    ];
    for (n, (sender, text, ago)) in p2p_lines.iter().enumerate() {
        say(b, &p2p, n, sender, text, *ago);
    }
    b.tenant.messages.sort_by_key(|m| m.create_time);

    ChatIds {
        all_hands,
        product,
        product_messages,
        release,
        badminton,
        market,
        p2p,
    }
}

struct EventIds {
    standup: String,
    weekly: String,
    review: String,
    one_on_one: String,
    quarterly: String,
    team_building: String,
}

fn seed_events(b: &mut Builder) -> EventIds {
    let calendar_id = b.tenant.calendar_id.clone();
    let other_calendar = format!(
        "feishu.cn_{}@group.calendar.feishu.cn",
        token_id("calendar:zhangwei", 22)
    );
    let product_team = [
        "zhangwei",
        "wangfang",
        "lina",
        "liuyang",
        "chenjing",
        "yangfan",
        "zhangxiaoming",
    ];
    struct Spec<'a> {
        key: &'a str,
        summary: &'a str,
        description: &'a str,
        start: EventTime,
        end: EventTime,
        location: Option<&'a str>,
        recurrence: Option<&'a str>,
        organizer: &'a str,
        attendees: &'a [&'a str],
    }
    let ts = |t: i64| EventTime::Timestamp {
        ts: t,
        timezone: TIME_ZONE.to_owned(),
    };
    let specs = [
        Spec {
            key: "standup",
            summary: "每日站会",
            description: "昨天做了什么、今天计划做什么、有什么阻塞。",
            start: ts(b.at(-7, 9, 30)),
            end: ts(b.at(-7, 9, 45)),
            location: Some("3F 星河会议室"),
            recurrence: Some("FREQ=DAILY;INTERVAL=1;BYDAY=MO,TU,WE,TH,FR"),
            organizer: "linxiao",
            attendees: &product_team,
        },
        Spec {
            key: "weekly",
            summary: "产品研发周会",
            description: "同步各模块进展、风险和下周计划。纪要见《产品研发周会纪要》。",
            start: ts(b.at(-21, 14, 0)),
            end: ts(b.at(-21, 15, 0)),
            location: Some("5F 银河会议室"),
            recurrence: Some("FREQ=WEEKLY;INTERVAL=1;BYDAY=MO"),
            organizer: "linxiao",
            attendees: &product_team,
        },
        Spec {
            key: "review",
            summary: "v2.3 需求评审",
            description: "评审 v2.3 PRD：导出 Excel、首页改版、订单筛选。",
            start: ts(b.at(1, 10, 0)),
            end: ts(b.at(1, 11, 30)),
            location: Some("5F 银河会议室"),
            recurrence: None,
            organizer: "linxiao",
            attendees: &["zhangwei", "wangfang", "lina", "liuyang", "chenjing"],
        },
        Spec {
            key: "customer-call",
            summary: "华星科技客户电话会",
            description: "确认定制报表需求和上线时间。",
            start: ts(b.at(3, 16, 0)),
            end: ts(b.at(3, 16, 30)),
            location: None,
            recurrence: None,
            organizer: "linxiao",
            attendees: &["zhoujie", "zhaomin"],
        },
        Spec {
            key: "one-on-one",
            summary: "与张伟 1:1",
            description: "Q3 规划、团队分工。",
            start: ts(b.at(4, 11, 0)),
            end: ts(b.at(4, 11, 30)),
            location: Some("张伟办公室"),
            recurrence: None,
            organizer: "zhangwei",
            attendees: &["zhangwei"],
        },
        Spec {
            key: "quarterly",
            summary: "Q3 季度复盘",
            description: "回顾本季度目标完成情况，讨论下季度 OKR。",
            start: ts(b.at(8, 14, 0)),
            end: ts(b.at(8, 16, 0)),
            location: Some("6F 大会议室"),
            recurrence: None,
            organizer: "linxiao",
            attendees: &["zhangwei", "wangfang", "zhaomin", "zhoujie", "huangting"],
        },
        Spec {
            key: "design-walkthrough",
            summary: "设计走查",
            description: "走查首页改版的交互细节。",
            start: ts(b.at(9, 15, 0)),
            end: ts(b.at(9, 16, 0)),
            location: Some("3F 星河会议室"),
            recurrence: None,
            organizer: "linxiao",
            attendees: &["wangfang", "lina"],
        },
        Spec {
            key: "team-building",
            summary: "公司团建",
            description: "怀柔山谷徒步 + 烧烤，早上 8 点公司楼下集合。",
            start: EventTime::Date(local_day(b.week) + 11),
            end: EventTime::Date(local_day(b.week) + 11),
            location: Some("怀柔"),
            recurrence: None,
            organizer: "huangting",
            attendees: &["huangting"],
        },
    ];
    let mut ids = HashMap::new();
    for spec in specs {
        let event_id = format!("{}_0", uuid_id(&format!("event:{}", spec.key)));
        let organizer = b.id(spec.organizer);
        let mut attendees: Vec<Attendee> = Vec::new();
        let mut everyone: Vec<String> = vec![organizer.clone()];
        for open_id in
            std::iter::once(b.id("linxiao")).chain(spec.attendees.iter().map(|a| b.id(a)))
        {
            if !everyone.contains(&open_id) {
                everyone.push(open_id);
            }
        }
        for (n, open_id) in everyone.iter().enumerate() {
            let is_organizer = *open_id == organizer;
            attendees.push(Attendee {
                attendee_id: format!("user_{}", hex_id(&format!("{event_id}:{n}"), 16)),
                open_id: open_id.clone(),
                rsvp_status: if is_organizer || n % 3 != 2 {
                    "accept".to_owned()
                } else {
                    "needs_action".to_owned()
                },
                is_optional: false,
                is_organizer,
            });
        }
        b.tenant.events.push(Event {
            event_id: event_id.clone(),
            calendar_id: calendar_id.clone(),
            organizer_calendar_id: if spec.organizer == "linxiao" {
                calendar_id.clone()
            } else {
                other_calendar.clone()
            },
            organizer,
            summary: spec.summary.to_owned(),
            description: spec.description.to_owned(),
            start: spec.start,
            end: spec.end,
            location: spec.location.map(str::to_owned),
            recurrence: spec.recurrence.map(str::to_owned),
            visibility: "default".to_owned(),
            free_busy_status: "busy".to_owned(),
            attendee_ability: "can_see_others".to_owned(),
            attendees,
            cancelled_instances: Vec::new(),
            recurring_event_id: None,
            create_time: b.week - 30 * DAY,
            via_api: false,
            deleted: false,
        });
        ids.insert(spec.key, event_id);
    }
    let mut take = |key: &str| ids.remove(key).unwrap_or_default();
    EventIds {
        standup: take("standup"),
        weekly: take("weekly"),
        review: take("review"),
        one_on_one: take("one-on-one"),
        quarterly: take("quarterly"),
        team_building: take("team-building"),
    }
}

struct DocIds {
    prd: String,
    notes: String,
    onboarding: String,
    onboarding_node: String,
    space: String,
    /// Documents outside the wiki, for the drive.
    in_drive: Vec<String>,
}

const PRD_MARKDOWN: &str = "\
## 背景

华星科技等重点客户反馈订单数据无法方便地导出和分析，首页信息密度也偏低。v2.3 聚焦**数据导出**和**首页改版**。

## 目标

- 订单列表支持导出 Excel（.xlsx），单次最多 5 万行
- 首页改版：关键指标卡片前置，加载时间 P95 < 800ms
- 订单筛选支持按客户、状态和日期范围组合

## 需求详情

### 导出 Excel

1. 在订单列表右上角增加「导出」按钮
2. 导出内容与当前筛选条件一致
3. 超过 5 万行时提示用户缩小范围

### 首页改版

- 指标卡片：今日订单、待处理工单、本月收入
- 空状态和加载态使用新版插画

## 不做的事

- 批量编辑（推迟到 v2.4）

## 里程碑

- 需求评审：本周二
- 提测：下周一
- 发布：下周四晚 8 点";

const NOTES_MARKDOWN: &str = "\
## 参会人

林晓、张伟、王芳、李娜、刘洋、陈静、杨帆、张晓明

## 进展

- 首页改版前端已提测，回归中
- 订单导出接口分页问题已修复
- 列表页慢查询已加索引，P95 从 1.8s 降到 600ms

## 风险

- iOS 日期选择器时区问题，李娜跟进

## 待办

- 林晓：周二组织 v2.3 需求评审
- 杨帆：准备灰度发布脚本
- 陈静：整理回归用例";

const OKR_MARKDOWN: &str = "\
## O1：提升重点客户满意度

- KR1：重点客户 NPS 从 32 提升到 45
- KR2：客户反馈的 P1 问题 48 小时内解决率 95%

## O2：提升产品性能

- KR1：核心页面 P95 加载时间 < 800ms
- KR2：线上事故数同比下降 50%";

const INTERVIEW_MARKDOWN: &str = "\
## 客户：华星科技

访谈对象：运营总监 陈女士

## 主要诉求

- 每周需要把订单数据导出到 Excel 做周报
- 希望有按区域汇总的定制报表
- 对移动端查看订单状态有需求

## 后续动作

- 周杰跟进定制报表报价
- 林晓评估移动端需求排期";

const ONBOARDING_MARKDOWN: &str = "\
## 第一天

- 找黄婷领取电脑和工牌
- 在飞书上加入「产品研发部」群
- 阅读《接口设计规范》

## 第一周

- 和导师一起完成本地环境搭建
- 认领一个 good first issue

## 常用链接

- 代码仓库：内部 GitLab
- 设计稿：飞书云空间「设计稿」文件夹";

const API_GUIDE_MARKDOWN: &str = "\
## 总则

- 接口使用 JSON，字段命名统一用 snake_case
- 时间统一使用毫秒时间戳字符串

## 分页

列表接口使用 `page_size` 和 `page_token` 分页，返回 `has_more`。

## 错误码

- 0 表示成功
- 4xx 表示调用方错误，5xx 表示服务端错误";

fn seed_documents(b: &mut Builder) -> DocIds {
    let owner = b.id("linxiao");
    let docs: &[(&str, &str, &str, &str, i64)] = &[
        (
            "prd",
            "v2.3 产品需求文档（PRD）",
            PRD_MARKDOWN,
            "linxiao",
            2,
        ),
        ("notes", "产品研发周会纪要", NOTES_MARKDOWN, "linxiao", 1),
        ("okr", "第三季度 OKR 草稿", OKR_MARKDOWN, "linxiao", 9),
        (
            "interview",
            "客户访谈记录：华星科技",
            INTERVIEW_MARKDOWN,
            "zhoujie",
            14,
        ),
        (
            "onboarding",
            "新员工入职指南",
            ONBOARDING_MARKDOWN,
            "huangting",
            40,
        ),
        (
            "api-guide",
            "接口设计规范",
            API_GUIDE_MARKDOWN,
            "zhangwei",
            60,
        ),
    ];
    let mut ids = HashMap::new();
    for (key, title, markdown, doc_owner, age_days) in docs {
        let document_id = token_id(&format!("docx:{key}"), 27);
        let mut n = 0;
        let blocks = docs::markdown_to_blocks(markdown, &mut || {
            n += 1;
            format!("doxcn{}", token_id(&format!("block:{key}:{n}"), 22))
        });
        let updated = b.week - age_days * DAY + 10 * 3600;
        b.tenant.documents.push(Document {
            document_id: document_id.clone(),
            title: (*title).to_owned(),
            blocks,
            revision_id: 12 + i64::try_from(b.tenant.documents.len()).unwrap_or(0),
            owner: if *doc_owner == "linxiao" {
                owner.clone()
            } else {
                b.id(doc_owner)
            },
            created_at: updated - 5 * DAY,
            updated_at: updated,
            folder_token: String::new(),
            via_api: false,
        });
        ids.insert(*key, document_id);
    }
    let space = format!(
        "7{}",
        &hex_id("wiki-space:team", 18).replace(char::is_alphabetic, "3")
    );
    let node = |b: &mut Builder, key: &str, title: &str, creator: &str| {
        let node_token = format!("wikcn{}", token_id(&format!("wiki:{key}"), 22));
        b.tenant.wiki_nodes.push(WikiNode {
            space_id: space.clone(),
            node_token: node_token.clone(),
            obj_token: ids.get(key).cloned().unwrap_or_default(),
            title: title.to_owned(),
            creator: b.id(creator),
            created_at: b.week - 90 * DAY,
        });
        node_token
    };
    let onboarding_node = node(b, "onboarding", "新员工入职指南", "huangting");
    node(b, "api-guide", "接口设计规范", "zhangwei");
    let take = |key: &str| ids.get(key).cloned().unwrap_or_default();
    DocIds {
        prd: take("prd"),
        notes: take("notes"),
        onboarding: take("onboarding"),
        onboarding_node,
        space,
        in_drive: ["prd", "notes", "okr", "interview"]
            .iter()
            .map(|k| take(k))
            .collect(),
    }
}

struct TaskIds {
    open: String,
    completed: String,
    delegated: String,
}

/// (key, summary, description, due: (day, hour, all day), assignee, completed days ago)
type TaskSpec<'a> = (
    &'a str,
    &'a str,
    &'a str,
    Option<(i64, i64, bool)>,
    &'a str,
    Option<i64>,
);

fn seed_tasks(b: &mut Builder) -> TaskIds {
    let me = b.id("linxiao");
    let specs: &[TaskSpec<'_>] = &[
        (
            "review-notes",
            "整理 v2.3 需求评审意见",
            "评审结束后汇总意见，更新 PRD。",
            Some((2, 18, false)),
            "linxiao",
            None,
        ),
        (
            "quote",
            "给华星科技发送报价方案",
            "包含定制报表的报价。",
            Some((3, 12, false)),
            "linxiao",
            None,
        ),
        (
            "design-review",
            "审阅王芳的首页设计稿",
            "",
            Some((1, 18, false)),
            "linxiao",
            None,
        ),
        (
            "roadmap",
            "更新产品路线图",
            "补充 v2.4 的批量编辑。",
            Some((7, 0, true)),
            "linxiao",
            None,
        ),
        (
            "quarterly",
            "准备季度复盘材料",
            "数据看板截图 + OKR 完成情况。",
            Some((8, 10, false)),
            "linxiao",
            None,
        ),
        (
            "demo-script",
            "准备行业展会产品演示脚本",
            "",
            None,
            "linxiao",
            None,
        ),
        (
            "expenses",
            "提交差旅报销单",
            "上海出差 3 天。",
            Some((-3, 18, false)),
            "linxiao",
            Some(3),
        ),
        (
            "release-window",
            "确认 v2.3 发布窗口",
            "",
            Some((-2, 12, false)),
            "linxiao",
            Some(2),
        ),
        (
            "survey",
            "填写入职流程问卷",
            "黄婷发来的问卷。",
            None,
            "linxiao",
            Some(6),
        ),
        (
            "ios-date-bug",
            "跟进 iOS 日期选择器问题",
            "时区转换导致显示 1970 年。",
            Some((2, 18, false)),
            "lina",
            None,
        ),
    ];
    let mut ids = HashMap::new();
    for (n, (key, summary, description, due, assignee, completed)) in specs.iter().enumerate() {
        let guid = uuid_id(&format!("task:{key}"));
        let created = (b.week - 10 * DAY + i64::try_from(n).unwrap_or(0) * 3600) * 1000;
        let due = due.map(|(day, hour, all_day)| {
            let at = if all_day {
                local_midnight(local_day(b.week) + day)
            } else {
                b.at(day, hour, 0)
            };
            (at * 1000, all_day)
        });
        b.tenant.tasks.push(Task {
            guid: guid.clone(),
            task_id: format!("t{}", 100_200 + n * 7),
            summary: (*summary).to_owned(),
            description: (*description).to_owned(),
            due,
            creator: me.clone(),
            assignees: vec![b.id(assignee)],
            followers: Vec::new(),
            completed_at: completed.map_or(0, |ago| (b.now_ms / 1000 - ago * DAY) * 1000),
            created_at: created,
            updated_at: created,
            via_api: false,
        });
        ids.insert(*key, guid);
    }
    let mut take = |key: &str| ids.remove(key).unwrap_or_default();
    TaskIds {
        open: take("review-notes"),
        completed: take("expenses"),
        delegated: take("ios-date-bug"),
    }
}

struct FolderIds {
    archive: String,
    archive_files: usize,
    design: String,
}

fn seed_drive(b: &mut Builder, docs: &DocIds) -> FolderIds {
    let me = b.id("linxiao");
    let root = format!("nodcn{}", token_id("folder:root", 22));
    let base = b.week - 2 * DAY;
    let file =
        |b: &mut Builder, token: String, name: String, kind: &str, parent: &str, age: i64| {
            b.tenant.files.push(DriveFile {
                token: token.clone(),
                name,
                kind: kind.to_owned(),
                parent_token: parent.to_owned(),
                created_at: base - age - 30 * DAY,
                modified_at: base - age,
                owner: me.clone(),
            });
            token
        };
    let archive = file(
        b,
        format!("fldcn{}", token_id("folder:archive", 22)),
        "项目归档".to_owned(),
        "folder",
        &root,
        3600,
    );
    let design = file(
        b,
        format!("fldcn{}", token_id("folder:design", 22)),
        "设计稿".to_owned(),
        "folder",
        &root,
        7200,
    );
    let contracts = file(
        b,
        format!("fldcn{}", token_id("folder:contracts", 22)),
        "合同与报价".to_owned(),
        "folder",
        &root,
        10_800,
    );
    for (n, document_id) in docs.in_drive.iter().enumerate() {
        let (title, modified) = b
            .tenant
            .documents
            .iter()
            .find(|d| d.document_id == *document_id)
            .map(|d| (d.title.clone(), d.updated_at))
            .unwrap_or_default();
        let age = base - modified + i64::try_from(n).unwrap_or(0);
        file(b, document_id.clone(), title, "docx", &root, age);
    }
    for doc in &mut b.tenant.documents {
        if docs.in_drive.contains(&doc.document_id) {
            doc.folder_token = root.clone();
        }
    }
    let archive_files = 230;
    for n in 1..=archive_files {
        let (kind, prefix, name) = match n % 4 {
            0 => ("docx", "docx", format!("项目周报 第 {n} 期")),
            1 => ("sheet", "shtcn", format!("数据看板 {n}")),
            2 => ("file", "boxcn", format!("会议录音_{n:03}.m4a")),
            _ => ("bitable", "bascn", format!("需求池归档 {n}")),
        };
        let token = if kind == "docx" {
            token_id(&format!("archive:{n}"), 27)
        } else {
            format!("{prefix}{}", token_id(&format!("archive:{n}"), 22))
        };
        let age = i64::try_from(n).unwrap_or(0) * 3 * 3600;
        file(b, token, name, kind, &archive, age);
    }
    let design_files = [
        "首页改版 v3.fig",
        "首页改版 v2.fig",
        "订单导出流程.png",
        "空状态插画.svg",
        "加载态动效.mp4",
        "图标库 2.0.sketch",
        "色彩规范.pdf",
        "移动端订单页.fig",
        "设计走查清单",
        "用户旅程图.png",
        "竞品分析.pdf",
        "品牌字体.zip",
    ];
    for (n, name) in design_files.iter().enumerate() {
        let kind = if *name == "设计走查清单" {
            "docx"
        } else {
            "file"
        };
        let token = if kind == "docx" {
            token_id(&format!("design:{n}"), 27)
        } else {
            format!("boxcn{}", token_id(&format!("design:{n}"), 22))
        };
        let age = i64::try_from(n).unwrap_or(0) * DAY;
        file(b, token, (*name).to_owned(), kind, &design, age);
    }
    for (n, name) in ["华星科技年度合同.pdf", "华星科技报价单", "标准报价模板"]
        .iter()
        .enumerate()
    {
        let kind = if n == 0 { "file" } else { "sheet" };
        let token = format!(
            "{}{}",
            if n == 0 { "boxcn" } else { "shtcn" },
            token_id(&format!("contracts:{n}"), 22)
        );
        file(
            b,
            token,
            (*name).to_owned(),
            kind,
            &contracts,
            i64::try_from(n).unwrap_or(0) * DAY,
        );
    }
    b.tenant.root_folder = root;
    FolderIds {
        archive,
        archive_files,
        design,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seed_is_stable_and_consistent() {
        let (tenant, ids) = build(1_725_000_000_000);
        let (_, again) = build(1_725_000_000_000 + 9 * DAY * 1000);
        assert_eq!(ids, again, "ids do not depend on the day");
        assert_eq!(tenant.people.len(), 13);
        assert_eq!(ids.demo_user, "ou_demo_linxiao");
        let big = tenant.chat(&ids.all_hands_chat_id).map(Chat::user_count);
        assert_eq!(big, Some(128));
        let history = tenant
            .messages
            .iter()
            .filter(|m| m.chat_id == ids.product_chat_id)
            .count();
        assert_eq!(history, ids.product_chat_messages);
        assert!(history > 50);
        assert_eq!(
            tenant
                .files
                .iter()
                .filter(|f| f.parent_token == ids.archive_folder_token)
                .count(),
            ids.archive_files
        );
    }
}
