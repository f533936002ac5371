//! FAST 1.1 template XML: the model of a template set, parsed and checked.
//!
//! [`TemplateSet::parse`] reads `<templates>` (or a lone `<template>`) with roxmltree and
//! checks every static rule it can at load: operators on types they apply to (S2), initial
//! values that convert (S3), constants with a value (S4), mandatory defaults with a value
//! (S5), unique template ids and names, template references that resolve and do not recurse.
//! A failure names the template, the field and the reason.

use crate::error::TemplateError;
pub use crate::types::FieldType;

/// Field operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OpKind {
    None,
    Constant,
    Default,
    Copy,
    Increment,
    Delta,
    Tail,
}

impl OpKind {
    pub fn name(self) -> &'static str {
        match self {
            OpKind::None => "none",
            OpKind::Constant => "constant",
            OpKind::Default => "default",
            OpKind::Copy => "copy",
            OpKind::Increment => "increment",
            OpKind::Delta => "delta",
            OpKind::Tail => "tail",
        }
    }
}

/// An operator with its dictionary, key and initial value (as written in the XML).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Operator {
    pub kind: OpKind,
    pub dictionary: Option<String>,
    pub key: Option<String>,
    pub value: Option<String>,
}

impl Operator {
    pub fn none() -> Operator {
        Operator { kind: OpKind::None, dictionary: None, key: None, value: None }
    }
}

/// How a decimal's operators are given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FieldOp {
    /// One operator for the whole field (for a decimal: the exponent and mantissa as a pair).
    Single(Operator),
    /// A decimal with separate exponent and mantissa operators.
    Split { exponent: Operator, mantissa: Operator },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Presence {
    Mandatory,
    Optional,
}

/// A scalar field instruction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    pub name: String,
    pub ns: Option<String>,
    pub id: Option<String>,
    pub presence: Presence,
    pub ty: FieldType,
    /// `length` attribute of a string or byte vector (the length field's name); kept for
    /// listings only.
    pub length_name: Option<String>,
    pub op: FieldOp,
}

/// A sequence: a length field and a body repeated that many times.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sequence {
    pub name: String,
    pub presence: Presence,
    pub dictionary: Option<String>,
    pub type_ref: Option<String>,
    /// The length field (uInt32), named `<name>:length` when the XML gives none.
    pub length: Field,
    pub body: Vec<Instruction>,
}

/// A group: a named block of instructions, optional as a whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    pub name: String,
    pub presence: Presence,
    pub dictionary: Option<String>,
    pub type_ref: Option<String>,
    pub body: Vec<Instruction>,
}

/// One instruction of a template body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Instruction {
    Field(Field),
    Sequence(Sequence),
    Group(Group),
    /// `Some(name)`: static reference (the named template's instructions in place);
    /// `None`: dynamic (a presence map and a template id in the stream).
    TemplateRef(Option<String>),
}

/// A template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    pub name: String,
    pub id: Option<u32>,
    pub dictionary: Option<String>,
    pub type_ref: Option<String>,
    /// `reset="Y"` (an mFAST/QuickFAST extension): every dictionary is reset before a message
    /// of this template is decoded or encoded.
    pub reset: bool,
    pub body: Vec<Instruction>,
}

/// A set of templates as loaded from one or more XML documents.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TemplateSet {
    pub templates: Vec<Template>,
    /// What was accepted though not quite right, each naming its line (a namespace prefix
    /// used without a declaration, as exchanges' template files sometimes do).
    pub warnings: Vec<String>,
}

/// The namespace of the FAST session control protocol, whose `Reset` template (id 120)
/// resets every dictionary.
pub const SCP_NAMESPACE: &str = "http://www.fixprotocol.org/ns/fast/scp/1.1";

/// Namespace prefixes an XML document uses (in element and attribute names) without
/// declaring them, each with the line of its first use; and the document with a
/// declaration of each added to its root element (on the same line, so that line numbers
/// hold). Exchanges ship template files like that (`scp:reset` with no `xmlns:scp`); an
/// XML parser refuses them.
fn declare_prefixes(xml: &str) -> (std::borrow::Cow<'_, str>, Vec<(String, usize)>) {
    let b = xml.as_bytes();
    let mut declared: Vec<&str> = vec!["xml", "xmlns"];
    let mut used: Vec<(String, usize)> = Vec::new();
    let mut root_name_end = None;
    let (mut i, mut line) = (0, 1);
    let name_end = |mut j: usize| {
        while j < b.len() && !matches!(b[j], b' ' | b'\t' | b'\n' | b'\r' | b'/' | b'>' | b'=') {
            j += 1;
        }
        j
    };
    while i < b.len() {
        match b[i] {
            b'\n' => line += 1,
            b'<' if b.get(i + 1).is_some_and(|c| *c == b'!' || *c == b'?') => {
                // Comments, CDATA, declarations and processing instructions: skip whole.
                let close: &[u8] = match b.get(i + 1..i + 4) {
                    Some(b"!--") => b"-->",
                    Some(b"![C") => b"]]>",
                    _ => b">",
                };
                let rest = &xml[i..];
                let n = rest.find(std::str::from_utf8(close).unwrap_or(">")).map_or(rest.len(), |k| k + close.len());
                line += rest[..n].matches('\n').count();
                i += n;
                continue;
            }
            b'<' => {
                // A start or end tag: its name, then its attributes' names up to '>'.
                let start = i + 1 + usize::from(b.get(i + 1) == Some(&b'/'));
                let end = name_end(start);
                if root_name_end.is_none() && b.get(i + 1) != Some(&b'/') {
                    root_name_end = Some(end);
                }
                let mut names = vec![&xml[start..end]];
                let mut j = end;
                let mut quote = None;
                let mut tag_line = line;
                while j < b.len() && (quote.is_some() || b[j] != b'>') {
                    match (quote, b[j]) {
                        (None, b'"' | b'\'') => quote = Some(b[j]),
                        (Some(q), c) if c == q => quote = None,
                        (None, c) if c.is_ascii_alphabetic() || c == b'_' => {
                            let e = name_end(j);
                            names.push(&xml[j..e]);
                            j = e;
                            continue;
                        }
                        (_, b'\n') => tag_line += 1,
                        _ => {}
                    }
                    j += 1;
                }
                for n in names {
                    if let Some(decl) = n.strip_prefix("xmlns:") {
                        declared.push(decl);
                    } else if let Some((prefix, _)) = n.split_once(':') {
                        if !used.iter().any(|(p, _)| p == prefix) {
                            used.push((prefix.to_string(), line));
                        }
                    }
                }
                line = tag_line;
                i = j;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    used.retain(|(p, _)| !declared.contains(&p.as_str()));
    match (used.is_empty(), root_name_end) {
        (false, Some(at)) => {
            let decls: String = used
                .iter()
                .map(|(p, _)| {
                    let ns = if p == "scp" { SCP_NAMESPACE.to_string() } else { format!("urn:undeclared:{p}") };
                    format!(" xmlns:{p}=\"{ns}\"")
                })
                .collect();
            (std::borrow::Cow::Owned(format!("{}{decls}{}", &xml[..at], &xml[at..])), used)
        }
        _ => (std::borrow::Cow::Borrowed(xml), Vec::new()),
    }
}

fn attr<'a>(node: roxmltree::Node<'a, '_>, name: &str) -> Option<&'a str> {
    node.attribute(name)
}

fn bool_attr(v: Option<&str>) -> bool {
    matches!(v.map(str::to_ascii_lowercase).as_deref(), Some("y" | "yes" | "true" | "1"))
}

struct Ctx<'a> {
    template: &'a str,
}

impl Ctx<'_> {
    fn err(&self, field: &str, reason: impl Into<String>) -> TemplateError {
        TemplateError::new(self.template, field, reason)
    }
}

fn elements<'a, 'i>(node: roxmltree::Node<'a, 'i>) -> impl Iterator<Item = roxmltree::Node<'a, 'i>> {
    node.children().filter(|n| n.is_element())
}

fn parse_presence(ctx: &Ctx, name: &str, node: roxmltree::Node) -> Result<Presence, TemplateError> {
    match attr(node, "presence") {
        None | Some("mandatory") => Ok(Presence::Mandatory),
        Some("optional") => Ok(Presence::Optional),
        Some(other) => Err(ctx.err(name, format!("presence {other:?} is neither mandatory nor optional"))),
    }
}

fn parse_operator(ctx: &Ctx, name: &str, node: roxmltree::Node) -> Result<Operator, TemplateError> {
    let kind = match node.tag_name().name() {
        "constant" => OpKind::Constant,
        "default" => OpKind::Default,
        "copy" => OpKind::Copy,
        "increment" => OpKind::Increment,
        "delta" => OpKind::Delta,
        "tail" => OpKind::Tail,
        other => return Err(ctx.err(name, format!("unknown operator <{other}>"))),
    };
    Ok(Operator {
        kind,
        dictionary: attr(node, "dictionary").map(str::to_string),
        key: attr(node, "key").map(str::to_string),
        value: attr(node, "value").map(str::to_string),
    })
}

fn single_operator(ctx: &Ctx, name: &str, node: roxmltree::Node) -> Result<Operator, TemplateError> {
    let mut ops = elements(node);
    let op = match ops.next() {
        None => Operator::none(),
        Some(n) => parse_operator(ctx, name, n)?,
    };
    if let Some(extra) = ops.next() {
        return Err(ctx.err(name, format!("more than one operator (<{}>)", extra.tag_name().name())));
    }
    Ok(op)
}

fn parse_field(ctx: &Ctx, node: roxmltree::Node) -> Result<Field, TemplateError> {
    let tag = node.tag_name().name();
    let name = attr(node, "name").unwrap_or_default().to_string();
    if name.is_empty() {
        return Err(ctx.err("", format!("<{tag}> without a name")));
    }
    let ty = match tag {
        "uInt32" | "length" => FieldType::UInt32,
        "int32" => FieldType::Int32,
        "uInt64" => FieldType::UInt64,
        "int64" => FieldType::Int64,
        "decimal" => FieldType::Decimal,
        "string" => match attr(node, "charset") {
            None | Some("ascii") => FieldType::Ascii,
            Some("unicode") => FieldType::Unicode,
            Some(other) => return Err(ctx.err(&name, format!("unknown charset {other:?}"))),
        },
        "byteVector" => FieldType::Bytes,
        other => return Err(ctx.err(&name, format!("unknown field type <{other}>"))),
    };
    let presence = parse_presence(ctx, &name, node)?;
    let mut length_name = None;
    let op = if ty == FieldType::Decimal {
        let mut exponent = None;
        let mut mantissa = None;
        let mut single = None;
        for child in elements(node) {
            match child.tag_name().name() {
                "exponent" => exponent = Some(single_operator(ctx, &name, child)?),
                "mantissa" => mantissa = Some(single_operator(ctx, &name, child)?),
                _ => {
                    if single.is_some() {
                        return Err(ctx.err(&name, "more than one operator"));
                    }
                    single = Some(parse_operator(ctx, &name, child)?);
                }
            }
        }
        match (single, exponent, mantissa) {
            (Some(_), Some(_), _) | (Some(_), _, Some(_)) => {
                return Err(ctx.err(&name, "a decimal has one operator or exponent/mantissa operators, not both"))
            }
            (Some(op), None, None) => FieldOp::Single(op),
            (None, None, None) => FieldOp::Single(Operator::none()),
            (None, e, m) => FieldOp::Split {
                exponent: e.unwrap_or_else(Operator::none),
                mantissa: m.unwrap_or_else(Operator::none),
            },
        }
    } else {
        let mut op = Operator::none();
        let mut seen = false;
        for child in elements(node) {
            if child.tag_name().name() == "length" {
                length_name = attr(child, "name").map(str::to_string);
                continue;
            }
            if seen {
                return Err(ctx.err(&name, "more than one operator"));
            }
            op = parse_operator(ctx, &name, child)?;
            seen = true;
        }
        FieldOp::Single(op)
    };
    let field = Field {
        name,
        ns: attr(node, "ns").map(str::to_string),
        id: attr(node, "id").map(str::to_string),
        presence,
        ty,
        length_name,
        op,
    };
    check_field(ctx, &field)?;
    Ok(field)
}

/// The static rules of one field (S2, S3, S4, S5).
fn check_field(ctx: &Ctx, f: &Field) -> Result<(), TemplateError> {
    let check = |op: &Operator, ty: FieldType, optional: bool, part: &str| -> Result<(), TemplateError> {
        let what = if part.is_empty() { String::new() } else { format!(" ({part})") };
        match op.kind {
            OpKind::Increment if !ty.is_integer() => {
                return Err(ctx.err(&f.name, format!("[S2] increment does not apply to {}{what}", ty.name())))
            }
            OpKind::Tail if !ty.is_vector() => {
                return Err(ctx.err(&f.name, format!("[S2] tail does not apply to {}{what}", ty.name())))
            }
            OpKind::Constant if op.value.is_none() => {
                return Err(ctx.err(&f.name, format!("[S4] constant without a value{what}")))
            }
            OpKind::Default if op.value.is_none() && !optional => {
                return Err(ctx.err(&f.name, format!("[S5] mandatory field with default and no value{what}")))
            }
            _ => {}
        }
        if let Some(v) = &op.value {
            crate::value::parse_initial(ty, v)
                .map_err(|reason| ctx.err(&f.name, format!("[S3] initial value {v:?}{what}: {reason}")))?;
        }
        Ok(())
    };
    let optional = f.presence == Presence::Optional;
    match &f.op {
        FieldOp::Single(op) => check(op, f.ty, optional, ""),
        FieldOp::Split { exponent, mantissa } => {
            check(exponent, FieldType::Int32, optional, "exponent")?;
            check(mantissa, FieldType::Int64, false, "mantissa")
        }
    }
}

fn parse_body(
    ctx: &Ctx,
    node: roxmltree::Node,
    skip_length: bool,
) -> Result<(Vec<Instruction>, Option<String>), TemplateError> {
    let mut body = Vec::new();
    let mut type_ref = None;
    for child in elements(node) {
        match child.tag_name().name() {
            "typeRef" => type_ref = attr(child, "name").map(str::to_string),
            "length" if skip_length => {}
            "sequence" => body.push(Instruction::Sequence(parse_sequence(ctx, child)?)),
            "group" => {
                let name = attr(child, "name").unwrap_or_default().to_string();
                let presence = parse_presence(ctx, &name, child)?;
                let (inner, tr) = parse_body(ctx, child, false)?;
                body.push(Instruction::Group(Group {
                    name,
                    presence,
                    dictionary: attr(child, "dictionary").map(str::to_string),
                    type_ref: tr,
                    body: inner,
                }));
            }
            "templateRef" => body.push(Instruction::TemplateRef(attr(child, "name").map(str::to_string))),
            _ => body.push(Instruction::Field(parse_field(ctx, child)?)),
        }
    }
    Ok((body, type_ref))
}

fn parse_sequence(ctx: &Ctx, node: roxmltree::Node) -> Result<Sequence, TemplateError> {
    let name = attr(node, "name").unwrap_or_default().to_string();
    if name.is_empty() {
        return Err(ctx.err("", "<sequence> without a name"));
    }
    let presence = parse_presence(ctx, &name, node)?;
    let length_node = elements(node).find(|c| c.tag_name().name() == "length");
    let length = match length_node {
        Some(n) => {
            let lname = attr(n, "name").map(str::to_string).unwrap_or_else(|| format!("{name}:length"));
            let op = single_operator(ctx, &lname, n)?;
            Field {
                name: lname,
                ns: None,
                id: attr(n, "id").map(str::to_string),
                presence,
                ty: FieldType::UInt32,
                length_name: None,
                op: FieldOp::Single(op),
            }
        }
        None => Field {
            name: format!("{name}:length"),
            ns: None,
            id: None,
            presence,
            ty: FieldType::UInt32,
            length_name: None,
            op: FieldOp::Single(Operator::none()),
        },
    };
    check_field(ctx, &length)?;
    let (body, type_ref) = parse_body(ctx, node, true)?;
    Ok(Sequence { name, presence, dictionary: attr(node, "dictionary").map(str::to_string), type_ref, length, body })
}

fn parse_template(node: roxmltree::Node) -> Result<Template, TemplateError> {
    let name = attr(node, "name").unwrap_or_default().to_string();
    if name.is_empty() {
        return Err(TemplateError::new("", "", "<template> without a name"));
    }
    let ctx = Ctx { template: &name };
    let id = match attr(node, "id") {
        None => None,
        Some(s) => Some(
            s.trim()
                .parse::<u32>()
                .map_err(|_| ctx.err("", format!("template id {s:?} is not an unsigned 32-bit integer")))?,
        ),
    };
    let (body, type_ref) = parse_body(&ctx, node, false)?;
    Ok(Template {
        name: name.clone(),
        id,
        dictionary: attr(node, "dictionary").map(str::to_string),
        type_ref,
        // `reset="Y"`, `scp:reset="Y"` (any namespace), or the session control protocol's
        // own Reset template.
        reset: node.attributes().any(|a| a.name() == "reset" && bool_attr(Some(a.value())))
            || (node.tag_name().namespace() == Some(SCP_NAMESPACE) && name == "Reset"),
        body,
    })
}

impl TemplateSet {
    /// Parse one XML document: `<templates>` with `<template>` children, or a lone
    /// `<template>`.
    pub fn parse(xml: &str) -> Result<TemplateSet, TemplateError> {
        let mut set = TemplateSet::default();
        set.add_xml(xml)?;
        Ok(set)
    }

    /// Add the templates of another document (checked against those already loaded).
    pub fn add_xml(&mut self, xml: &str) -> Result<(), TemplateError> {
        let (xml, undeclared) = declare_prefixes(xml);
        for (p, line) in undeclared {
            self.warnings.push(format!("line {line}: namespace prefix {p:?} is used without a declaration (accepted)"));
        }
        let doc = roxmltree::Document::parse(&xml)
            .map_err(|e| TemplateError::new("", "", format!("[S1] not valid XML: {e}")))?;
        let root = doc.root_element();
        let nodes: Vec<_> = match root.tag_name().name() {
            "templates" => elements(root).filter(|n| n.tag_name().name() == "template").collect(),
            "template" => vec![root],
            other => {
                return Err(TemplateError::new(
                    "",
                    "",
                    format!("[S1] root element <{other}> is neither <templates> nor <template>"),
                ))
            }
        };
        for node in nodes {
            let t = parse_template(node)?;
            if self.templates.iter().any(|o| o.name == t.name) {
                return Err(TemplateError::new(&t.name, "", "a template of this name is already defined"));
            }
            if let Some(id) = t.id {
                if let Some(o) = self.templates.iter().find(|o| o.id == Some(id)) {
                    return Err(TemplateError::new(&t.name, "", format!("template id {id} is also {:?}", o.name)));
                }
            }
            self.templates.push(t);
        }
        self.check_refs()
    }

    /// Static template references name a template and do not recurse.
    fn check_refs(&self) -> Result<(), TemplateError> {
        fn walk<'a>(
            set: &'a TemplateSet,
            t: &'a Template,
            body: &'a [Instruction],
            stack: &mut Vec<&'a str>,
        ) -> Result<(), TemplateError> {
            for ins in body {
                match ins {
                    Instruction::TemplateRef(Some(name)) => {
                        let target = set.templates.iter().find(|o| &o.name == name).ok_or_else(|| {
                            TemplateError::new(&t.name, name, format!("templateRef to unknown template {name:?}"))
                        })?;
                        if stack.contains(&name.as_str()) {
                            return Err(TemplateError::new(&t.name, name, "static templateRef recurses"));
                        }
                        stack.push(name);
                        walk(set, target, &target.body, stack)?;
                        stack.pop();
                    }
                    Instruction::Sequence(s) => walk(set, t, &s.body, stack)?,
                    Instruction::Group(g) => walk(set, t, &g.body, stack)?,
                    _ => {}
                }
            }
            Ok(())
        }
        for t in &self.templates {
            let mut stack = vec![t.name.as_str()];
            walk(self, t, &t.body, &mut stack)?;
        }
        Ok(())
    }

    pub fn by_name(&self, name: &str) -> Option<&Template> {
        self.templates.iter().find(|t| t.name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(xml: &str) -> TemplateError {
        TemplateSet::parse(xml).unwrap_err()
    }

    #[test]
    fn static_errors_name_template_field_and_reason() {
        let e = err(
            r#"<templates><template name="T" id="1"><string name="S"><increment/></string></template></templates>"#,
        );
        assert_eq!((e.template.as_str(), e.field.as_str()), ("T", "S"));
        assert!(e.reason.starts_with("[S2]"), "{e}");
        let e =
            err(r#"<templates><template name="T" id="1"><uInt32 name="A"><constant/></uInt32></template></templates>"#);
        assert!(e.reason.starts_with("[S4]"), "{e}");
        let e =
            err(r#"<templates><template name="T" id="1"><uInt32 name="A"><default/></uInt32></template></templates>"#);
        assert!(e.reason.starts_with("[S5]"), "{e}");
        let e = err(
            r#"<templates><template name="T" id="1"><uInt32 name="A"><copy value="x"/></uInt32></template></templates>"#,
        );
        assert!(e.reason.starts_with("[S3]"), "{e}");
        let e = err(r#"<templates><template name="T" id="1"><int32 name="A"><tail/></int32></template></templates>"#);
        assert!(e.reason.starts_with("[S2]"), "{e}");
        let e = err(
            r#"<templates><template name="T" id="1"><uInt32 name="A" presence="sometimes"/></template></templates>"#,
        );
        assert!(e.reason.contains("sometimes"), "{e}");
        let e = err(r#"<templates><template name="T" id="1"/><template name="U" id="1"/></templates>"#);
        assert!(e.reason.contains("also"), "{e}");
        let e = err(r#"<templates><template name="T" id="1"><templateRef name="X"/></template></templates>"#);
        assert!(e.reason.contains("unknown template"), "{e}");
        let e = err(r#"<templates><template name="T" id="1"><templateRef name="T"/></template></templates>"#);
        assert!(e.reason.contains("recurses"), "{e}");
        let e = err(r#"<templates><template name="T" id="1"><float name="F"/></template></templates>"#);
        assert!(e.reason.contains("unknown field type"), "{e}");
        let e = err("<templates><template");
        assert!(e.reason.starts_with("[S1]"), "{e}");
        let e = err(r#"<templates><template name="T" id="x1"/></templates>"#);
        assert!(e.reason.contains("x1"), "{e}");
        let e = err(
            r#"<templates><template name="T" id="1"><decimal name="D"><copy/><exponent><copy/></exponent></decimal></template></templates>"#,
        );
        assert!(e.reason.contains("not both"), "{e}");
        let e = err(
            r#"<templates><template name="T" id="1"><uInt32 name="A"><copy/><delta/></uInt32></template></templates>"#,
        );
        assert!(e.reason.contains("more than one"), "{e}");
    }

    #[test]
    fn parses_the_mfast_example() {
        let Ok(xml) = std::fs::read_to_string("../../../shared/data/fast/mfast/example.xml") else {
            eprintln!("skipped: ../shared/data absent");
            return;
        };
        let set = TemplateSet::parse(&xml).unwrap();
        let ids: Vec<_> = set.templates.iter().map(|t| t.id).collect();
        assert_eq!(ids, [Some(99), Some(1), Some(2)]);
        assert!(set.by_name("MarketData").unwrap().reset);
    }
}
