//! A Base (多维表格) as the emulator keeps it: apps, their tables, typed fields and records, and
//! how a record's cells go out on the wire. Writes echo the cells as sent; reads (search) give a
//! text cell as Feishu's rich-text segments (`[{"text":…,"type":"text"}]`), as the record APIs'
//! response examples show.

use std::collections::HashMap;

use serde_json::{Map, Value, json};

/// One Base app.
#[derive(Debug, Clone)]
pub(crate) struct Base {
    pub(crate) app_token: String,
    pub(crate) name: String,
    pub(crate) folder_token: String,
    pub(crate) time_zone: String,
    pub(crate) tables: Vec<BaseTable>,
}

/// One table of a Base.
#[derive(Debug, Clone)]
pub(crate) struct BaseTable {
    pub(crate) table_id: String,
    pub(crate) name: String,
    pub(crate) revision: i64,
    pub(crate) fields: Vec<BaseField>,
    pub(crate) records: Vec<BaseRecord>,
    /// `client_token` → the record it created (record create is idempotent on it).
    pub(crate) client_tokens: HashMap<String, String>,
}

/// A column.
#[derive(Debug, Clone)]
pub(crate) struct BaseField {
    pub(crate) field_id: String,
    pub(crate) name: String,
    pub(crate) kind: FieldKind,
    pub(crate) primary: bool,
}

/// The field types the emulator knows, with Feishu's `type` numbers.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum FieldKind {
    /// 1, 多行文本.
    Text,
    /// 2, 数字.
    Number,
    /// 3, 单选, with its options.
    SingleSelect(Vec<String>),
    /// 5, 日期 (milliseconds).
    Date,
}

/// A row.
#[derive(Debug, Clone)]
pub(crate) struct BaseRecord {
    pub(crate) record_id: String,
    /// Cells by field name, as written.
    pub(crate) fields: Map<String, Value>,
    /// Written through the Open API (not part of the seed).
    pub(crate) via_api: bool,
}

impl FieldKind {
    /// Feishu's `type` number.
    pub(crate) fn code(&self) -> i64 {
        match self {
            FieldKind::Text => 1,
            FieldKind::Number => 2,
            FieldKind::SingleSelect(_) => 3,
            FieldKind::Date => 5,
        }
    }

    /// A type number as a new table's field gives it (unknown ones become text).
    pub(crate) fn from_code(code: i64) -> FieldKind {
        match code {
            2 => FieldKind::Number,
            3 => FieldKind::SingleSelect(Vec::new()),
            5 => FieldKind::Date,
            _ => FieldKind::Text,
        }
    }

    fn ui_type(&self) -> &'static str {
        match self {
            FieldKind::Text => "Text",
            FieldKind::Number => "Number",
            FieldKind::SingleSelect(_) => "SingleSelect",
            FieldKind::Date => "DateTime",
        }
    }

    /// Why `value` cannot go into a cell of this type: Feishu's conversion error code and name
    /// (the record APIs' error tables: 1254060 TextFieldConvFail … 1254064 DatetimeFieldConvFail).
    pub(crate) fn check(&self, value: &Value) -> Result<(), (i64, &'static str)> {
        let fits = match self {
            FieldKind::Text => value.is_string(),
            FieldKind::Number => value.is_number(),
            FieldKind::SingleSelect(_) => value.is_string(),
            FieldKind::Date => value.is_i64() || value.is_u64(),
        };
        if fits || value.is_null() {
            return Ok(());
        }
        Err(match self {
            FieldKind::Text => (1254060, "TextFieldConvFail"),
            FieldKind::Number => (1254061, "NumberFieldConvFail"),
            FieldKind::SingleSelect(_) => (1254062, "SingleSelectFieldConvFail"),
            FieldKind::Date => (1254064, "DatetimeFieldConvFail"),
        })
    }
}

impl BaseField {
    /// The field as `fields` lists it.
    pub(crate) fn to_json(&self) -> Value {
        let property = match &self.kind {
            FieldKind::Number => json!({"formatter": "0"}),
            FieldKind::SingleSelect(options) => json!({"options": options
                .iter()
                .enumerate()
                .map(|(n, name)| json!({"color": n, "id": format!("opt{n:07}"), "name": name}))
                .collect::<Vec<_>>()}),
            FieldKind::Date => json!({"auto_fill": false, "date_formatter": "yyyy/MM/dd"}),
            FieldKind::Text => Value::Null,
        };
        json!({
            "field_id": self.field_id,
            "field_name": self.name,
            "is_primary": self.primary,
            "property": property,
            "type": self.kind.code(),
            "ui_type": self.kind.ui_type(),
        })
    }
}

impl BaseRecord {
    /// The record as create and update answer it: the cells as written.
    pub(crate) fn written(&self) -> Value {
        json!({"fields": self.fields, "id": self.record_id, "record_id": self.record_id})
    }

    /// The record as search answers it: text cells as rich-text segments, only `names` if given.
    pub(crate) fn read(&self, table: &BaseTable, names: Option<&[String]>) -> Value {
        let mut cells = Map::new();
        for (name, value) in &self.fields {
            if names.is_some_and(|n| !n.contains(name)) || value.is_null() {
                continue;
            }
            let text = table
                .fields
                .iter()
                .any(|f| &f.name == name && f.kind == FieldKind::Text);
            let cell = match value.as_str() {
                Some(s) if text => json!([{"text": s, "type": "text"}]),
                _ => value.clone(),
            };
            cells.insert(name.clone(), cell);
        }
        json!({"fields": cells, "record_id": self.record_id})
    }
}

fn field(id: &str, name: &str, kind: FieldKind, primary: bool) -> BaseField {
    BaseField {
        field_id: format!("fld{id}"),
        name: name.to_owned(),
        kind,
        primary,
    }
}

/// A new table with only its primary text field, as Feishu makes one with no fields given.
pub(crate) fn empty_table(table_id: String, name: String, fields: Vec<BaseField>) -> BaseTable {
    let fields = if fields.is_empty() {
        vec![field("Primary0", "文本", FieldKind::Text, true)]
    } else {
        fields
    };
    BaseTable {
        table_id,
        name,
        revision: 1,
        fields,
        records: Vec::new(),
        client_tokens: HashMap::new(),
    }
}

/// The demo tenant's Base 「需求池」 with its table 「需求」 and three requirements; `ids` gives the
/// stable app token, table id and record ids.
pub(crate) fn seed(ids: impl Fn(&str, usize) -> String) -> Base {
    let status = FieldKind::SingleSelect(vec!["待评审".into(), "开发中".into(), "已上线".into()]);
    let mut table = empty_table(
        format!("tbl{}", ids("base:table:requirements", 13)),
        "需求".to_owned(),
        vec![
            field("Title0001", "标题", FieldKind::Text, true),
            field("Status001", "状态", status, false),
            field("Points001", "估分", FieldKind::Number, false),
        ],
    );
    let rows = [
        ("订单导出支持 Excel", "开发中", 5),
        ("首页改版 v3", "待评审", 8),
        ("消息免打扰", "已上线", 3),
    ];
    for (n, (title, state, points)) in rows.into_iter().enumerate() {
        let mut cells = Map::new();
        cells.insert("标题".into(), json!(title));
        cells.insert("状态".into(), json!(state));
        cells.insert("估分".into(), json!(points));
        table.records.push(BaseRecord {
            record_id: format!("rec{}", ids(&format!("base:record:{n}"), 10)),
            fields: cells,
            via_api: false,
        });
    }
    Base {
        app_token: format!("bascn{}", ids("base:requirements", 22)),
        name: "需求池".to_owned(),
        folder_token: String::new(),
        time_zone: "Asia/Shanghai".to_owned(),
        tables: vec![table],
    }
}
