//! A PL/pgSQL body as a tree of statements. Expressions and embedded SQL stay text, exactly as
//! written: PostgreSQL evaluates an expression as `SELECT expr` and hands embedded statements to
//! its SQL parser, and Shoal does the same with its own.

/// A block: `[<<label>>] [DECLARE ...] BEGIN ... [EXCEPTION ...] END [label]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Block {
    pub label: Option<String>,
    pub declarations: Vec<Declaration>,
    pub body: Vec<Stmt>,
    pub handlers: Vec<Handler>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Declaration {
    /// `name [CONSTANT] type [NOT NULL] [{DEFAULT | := | =} default]`; the type as written
    /// (`integer`, `t.col%TYPE`, `t%ROWTYPE`, `record`).
    Variable {
        name: String,
        constant: bool,
        data_type: String,
        not_null: bool,
        default: Option<String>,
    },
    /// `name ALIAS FOR $n` (or another variable's name).
    Alias { name: String, target: String },
    /// `name [[NO] SCROLL] CURSOR [(arguments)] FOR query`: a bound cursor.
    Cursor {
        name: String,
        /// Some(true) for SCROLL, Some(false) for NO SCROLL.
        scroll: Option<bool>,
        /// (name, type as written) of each argument.
        arguments: Vec<(String, String)>,
        query: String,
    },
}

/// `WHEN condition [OR condition ...] THEN statements` of an EXCEPTION clause.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Handler {
    pub conditions: Vec<Condition>,
    pub body: Vec<Stmt>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Condition {
    /// A condition name (`division_by_zero`, `others`), lower-cased.
    Name(String),
    /// `SQLSTATE '22012'`.
    SqlState(String),
}

/// `INTO [STRICT] target [, ...]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Into {
    pub strict: bool,
    pub targets: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stmt {
    Block(Block),
    /// `target := expr` (or `=`); the target as written (`x`, `r.f`, `a[i]`).
    Assign {
        target: String,
        expr: String,
    },
    If {
        /// (condition, statements) of IF and each ELSIF.
        branches: Vec<(String, Vec<Stmt>)>,
        otherwise: Option<Vec<Stmt>>,
    },
    Case {
        /// The searched-for value of `CASE x WHEN ...`; None for `CASE WHEN cond ...`.
        subject: Option<String>,
        /// (the WHEN list or condition, statements).
        arms: Vec<(String, Vec<Stmt>)>,
        otherwise: Option<Vec<Stmt>>,
    },
    Loop {
        label: Option<String>,
        body: Vec<Stmt>,
    },
    While {
        label: Option<String>,
        condition: String,
        body: Vec<Stmt>,
    },
    /// `FOR var IN [REVERSE] low .. high [BY step] LOOP`.
    ForRange {
        label: Option<String>,
        var: String,
        reverse: bool,
        low: String,
        high: String,
        step: Option<String>,
        body: Vec<Stmt>,
    },
    /// `FOR targets IN query LOOP`, or `IN EXECUTE text [USING ...]` when `dynamic`.
    ForQuery {
        label: Option<String>,
        targets: Vec<String>,
        query: String,
        dynamic: bool,
        using: Vec<String>,
        body: Vec<Stmt>,
    },
    /// `FOR record IN bound_cursor [(arguments)] LOOP`: opens the cursor, reads every row
    /// and closes it; `record` is declared by the loop.
    ForCursor {
        label: Option<String>,
        target: String,
        cursor: String,
        /// As written: `expr` or `name := expr`.
        arguments: Vec<String>,
        body: Vec<Stmt>,
    },
    /// `FOREACH target [SLICE n] IN ARRAY expr LOOP`.
    Foreach {
        label: Option<String>,
        target: String,
        slice: Option<String>,
        array: String,
        body: Vec<Stmt>,
    },
    /// EXIT (`continue_loop` false) or CONTINUE, `[label] [WHEN condition]`.
    Exit {
        continue_loop: bool,
        label: Option<String>,
        condition: Option<String>,
    },
    Return(Option<String>),
    ReturnNext(Option<String>),
    /// `RETURN QUERY query`, or `RETURN QUERY EXECUTE text [USING ...]` when `dynamic`.
    ReturnQuery {
        query: String,
        dynamic: bool,
        using: Vec<String>,
    },
    Raise(Raise),
    /// `PERFORM query`: the query as `SELECT ...`.
    Perform(String),
    /// `EXECUTE text [INTO [STRICT] targets] [USING expr, ...]`.
    Execute {
        command: String,
        into: Option<Into>,
        using: Vec<String>,
    },
    /// `GET [STACKED] DIAGNOSTICS target = item, ...`.
    GetDiagnostics {
        stacked: bool,
        items: Vec<(String, String)>,
    },
    /// `ASSERT condition [, message]`.
    Assert {
        condition: String,
        message: Option<String>,
    },
    /// COMMIT or ROLLBACK (`commit` false), `[AND [NO] CHAIN]`.
    Transaction {
        commit: bool,
        chain: bool,
    },
    Null,
    /// `OPEN cursor ...`.
    Open {
        cursor: String,
        /// Some(true) for SCROLL, Some(false) for NO SCROLL.
        scroll: Option<bool>,
        source: OpenSource,
    },
    /// `FETCH [direction {FROM | IN}] cursor INTO targets`, or MOVE (no `into`).
    Fetch {
        /// The direction as written (`NEXT`, `RELATIVE -2`, ...); None for NEXT.
        direction: Option<String>,
        cursor: String,
        into: Option<Into>,
    },
    /// `CLOSE cursor`.
    Close(String),
    /// Any other statement: SQL for Shoal's parser, with PL/pgSQL's INTO taken out of it.
    Sql {
        text: String,
        into: Option<Into>,
    },
}

/// What OPEN opens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OpenSource {
    /// A bound cursor's query, with its arguments as written (`expr` or `name := expr`).
    Bound(Vec<String>),
    /// `FOR query`.
    Query(String),
    /// `FOR EXECUTE command [USING expr, ...]`.
    Execute { command: String, using: Vec<String> },
}

/// `RAISE [level] ['format' [, arg ...] | condition | SQLSTATE 'xxxxx'] [USING option = expr,
/// ...]`; all None and empty for a bare `RAISE` (re-raise in a handler).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Raise {
    /// `debug`, `log`, `info`, `notice`, `warning` or `exception` (the default).
    pub level: String,
    pub format: Option<String>,
    pub args: Vec<String>,
    pub condition: Option<Condition>,
    /// (option, expr): MESSAGE, DETAIL, HINT, ERRCODE, ... lower-cased.
    pub options: Vec<(String, String)>,
}
