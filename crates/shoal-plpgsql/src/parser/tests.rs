use super::*;

fn body(text: &str) -> Vec<Stmt> {
    parse_body(text)
        .unwrap_or_else(|e| panic!("{e}: {text}"))
        .body
}

fn sql(text: &str) -> Stmt {
    Stmt::Sql {
        text: text.to_string(),
        into: None,
    }
}

#[test]
fn declarations_take_types_defaults_and_constants() {
    let block = parse_body(
        "DECLARE
            n integer := 0;
            total numeric(10,2) DEFAULT 1.5;
            k CONSTANT text NOT NULL = 'x;y';
            r t%ROWTYPE;
            c t.col%TYPE;
            a ALIAS FOR $1;
            cur CURSOR (lim int) FOR SELECT * FROM t LIMIT lim;
        BEGIN
            NULL;
        END",
    )
    .unwrap();
    assert_eq!(block.declarations.len(), 7);
    assert_eq!(
        block.declarations[1],
        Declaration::Variable {
            name: "total".into(),
            constant: false,
            data_type: "numeric(10,2)".into(),
            not_null: false,
            default: Some("1.5".into()),
        }
    );
    assert_eq!(
        block.declarations[2],
        Declaration::Variable {
            name: "k".into(),
            constant: true,
            data_type: "text".into(),
            not_null: true,
            default: Some("'x;y'".into()),
        }
    );
    assert!(
        matches!(&block.declarations[3], Declaration::Variable { data_type, .. } if data_type == "t%ROWTYPE")
    );
    assert_eq!(
        block.declarations[5],
        Declaration::Alias {
            name: "a".into(),
            target: "$1".into()
        }
    );
    assert_eq!(
        block.declarations[6],
        Declaration::Cursor {
            name: "cur".into(),
            scroll: None,
            arguments: vec![("lim".into(), "int".into())],
            query: "SELECT * FROM t LIMIT lim".into(),
        }
    );
    assert_eq!(block.body, vec![Stmt::Null]);
}

#[test]
fn control_flow_nests() {
    let stmts = body(
        "BEGIN
            IF x > 1 THEN y := 1; ELSIF CASE WHEN z THEN true END THEN y := 2; ELSE y := 3; END IF;
            <<outer>> FOR i IN REVERSE 10..1 BY 2 LOOP
                CONTINUE outer WHEN i = 4;
                WHILE y < 10 LOOP y := y + 1; EXIT; END LOOP;
            END LOOP outer;
            FOR r IN SELECT a, b FROM t WHERE a > 0 LOOP total := total + r.a; END LOOP;
            FOREACH v IN ARRAY arr LOOP NULL; END LOOP;
            CASE x WHEN 1, 2 THEN y := 0; ELSE y := 1; END CASE;
            LOOP EXIT WHEN true; END LOOP;
        END;",
    );
    assert_eq!(stmts.len(), 6);
    let Stmt::If {
        branches,
        otherwise,
    } = &stmts[0]
    else {
        panic!("{:?}", stmts[0])
    };
    assert_eq!(branches[1].0, "CASE WHEN z THEN true END");
    assert_eq!(otherwise.as_ref().unwrap().len(), 1);
    let Stmt::ForRange {
        label,
        var,
        reverse,
        low,
        high,
        step,
        body: inner,
    } = &stmts[1]
    else {
        panic!("{:?}", stmts[1])
    };
    assert_eq!(label.as_deref(), Some("outer"));
    assert_eq!((var.as_str(), *reverse), ("i", true));
    assert_eq!(
        (low.as_str(), high.as_str(), step.as_deref()),
        ("10", "1", Some("2"))
    );
    assert_eq!(
        inner[0],
        Stmt::Exit {
            continue_loop: true,
            label: Some("outer".into()),
            condition: Some("i = 4".into())
        }
    );
    assert!(
        matches!(&stmts[2], Stmt::ForQuery { query, dynamic: false, .. } if query == "SELECT a, b FROM t WHERE a > 0")
    );
    assert!(matches!(&stmts[3], Stmt::Foreach { array, .. } if array == "arr"));
    assert!(
        matches!(&stmts[4], Stmt::Case { subject: Some(s), arms, .. } if s == "x" && arms[0].0 == "1, 2")
    );
}

#[test]
fn embedded_sql_keeps_its_text_and_loses_plpgsql_into() {
    let stmts = body(
        "BEGIN
            SELECT count(*) INTO STRICT n FROM t WHERE a = 'it''s';
            INSERT INTO t VALUES (1) RETURNING id INTO new_id;
            UPDATE t SET a = a + 1 WHERE id = k;
            PERFORM pg_sleep(0);
            EXECUTE format('SELECT %I FROM t', col) INTO r USING k, 2;
            r.f := (SELECT max(a) FROM t);
            arr[2] = 5;
        END",
    );
    assert_eq!(
        stmts[0],
        Stmt::Sql {
            text: "SELECT count(*) FROM t WHERE a = 'it''s'".into(),
            into: Some(Into {
                strict: true,
                targets: vec!["n".into()]
            }),
        }
    );
    assert_eq!(
        stmts[1],
        Stmt::Sql {
            text: "INSERT INTO t VALUES (1) RETURNING id".into(),
            into: Some(Into {
                strict: false,
                targets: vec!["new_id".into()]
            }),
        }
    );
    assert_eq!(stmts[2], sql("UPDATE t SET a = a + 1 WHERE id = k"));
    assert_eq!(stmts[3], Stmt::Perform("SELECT pg_sleep(0)".into()));
    assert_eq!(
        stmts[4],
        Stmt::Execute {
            command: "format('SELECT %I FROM t', col)".into(),
            into: Some(Into {
                strict: false,
                targets: vec!["r".into()]
            }),
            using: vec!["k".into(), "2".into()],
        }
    );
    assert_eq!(
        stmts[5],
        Stmt::Assign {
            target: "r.f".into(),
            expr: "(SELECT max(a) FROM t)".into()
        }
    );
    assert_eq!(
        stmts[6],
        Stmt::Assign {
            target: "arr[2]".into(),
            expr: "5".into()
        }
    );
}

#[test]
fn raise_returns_and_exception_handlers() {
    let block = parse_body(
        "DECLARE n int; BEGIN
            RAISE NOTICE 'n is % and %', n, n + 1 USING HINT = 'look', ERRCODE = 'P0001';
            RAISE division_by_zero;
            RAISE SQLSTATE '22012' USING MESSAGE = 'no';
            RETURN NEXT n;
            RETURN QUERY SELECT 1;
            RETURN QUERY EXECUTE 'SELECT $1' USING n;
            GET DIAGNOSTICS n = ROW_COUNT;
            ASSERT n > 0, 'positive';
            COMMIT AND CHAIN;
            ROLLBACK;
            RETURN n * 2;
        EXCEPTION
            WHEN division_by_zero OR SQLSTATE '22003' THEN RETURN -1;
            WHEN others THEN RAISE;
        END",
    )
    .unwrap();
    let Stmt::Raise(notice) = &block.body[0] else {
        panic!()
    };
    assert_eq!(notice.level, "notice");
    assert_eq!(notice.format.as_deref(), Some("'n is % and %'"));
    assert_eq!(notice.args, vec!["n".to_string(), "n + 1".to_string()]);
    assert_eq!(
        notice.options,
        vec![
            ("hint".to_string(), "'look'".to_string()),
            ("errcode".to_string(), "'P0001'".to_string())
        ]
    );
    assert!(
        matches!(&block.body[1], Stmt::Raise(r) if r.condition == Some(Condition::Name("division_by_zero".into())) && r.level == "exception")
    );
    assert!(
        matches!(&block.body[2], Stmt::Raise(r) if r.condition == Some(Condition::SqlState("22012".into())))
    );
    assert_eq!(block.body[3], Stmt::ReturnNext(Some("n".into())));
    assert!(
        matches!(&block.body[5], Stmt::ReturnQuery { dynamic: true, using, .. } if using == &vec!["n".to_string()])
    );
    assert_eq!(
        block.body[6],
        Stmt::GetDiagnostics {
            stacked: false,
            items: vec![("n".into(), "row_count".into())]
        }
    );
    assert_eq!(
        block.body[8],
        Stmt::Transaction {
            commit: true,
            chain: true
        }
    );
    assert_eq!(block.body[10], Stmt::Return(Some("n * 2".into())));
    assert_eq!(block.handlers.len(), 2);
    assert_eq!(
        block.handlers[0].conditions,
        vec![
            Condition::Name("division_by_zero".into()),
            Condition::SqlState("22003".into())
        ]
    );
    assert!(
        matches!(&block.handlers[1].body[0], Stmt::Raise(r) if r.format.is_none() && r.condition.is_none())
    );
}

#[test]
fn errors_say_where() {
    let e = parse_body("BEGIN IF x THEN NULL; END;").unwrap_err();
    assert!(e.message.contains("expected IF"), "{e}");
    let e = parse_body("BEGIN x := 1 END").unwrap_err();
    assert!(e.message.contains("\";\""), "{e}");
    let e = parse_body("<<a>> BEGIN NULL; END b").unwrap_err();
    assert!(e.message.contains("differs"), "{e}");
    assert!(parse_body("BEGIN NULL; END; extra").is_err());
}

#[test]
fn every_prefix_of_a_body_parses_or_fails_without_panicking() {
    let text = "<<b>> DECLARE n int := 1; c CURSOR FOR SELECT 1; BEGIN
        IF n > 0 THEN FOR i IN 1..3 LOOP n := n + i; END LOOP; ELSE RAISE 'x %', n; END IF;
        SELECT a INTO r FROM t; arr[1] := 2; EXECUTE 'x' USING n; GET DIAGNOSTICS n = ROW_COUNT;
        CASE WHEN n = 1 THEN NULL; END CASE; RETURN QUERY SELECT 1;
        EXCEPTION WHEN others THEN RAISE; END b;";
    for end in 0..=text.len() {
        if text.is_char_boundary(end) {
            let _ = parse_body(&text[..end]);
        }
    }
    assert!(parse_body(text).is_ok());
}

#[test]
fn a_nested_block_ends_with_its_semicolon() {
    let stmts = body(
        "BEGIN
            BEGIN
                PERFORM 1 / 0;
            EXCEPTION WHEN division_by_zero THEN
                NULL;
            END;
            RETURN 1;
        END",
    );
    assert_eq!(stmts.len(), 2);
    assert!(matches!(&stmts[0], Stmt::Block(b) if b.handlers.len() == 1));
    assert_eq!(stmts[1], Stmt::Return(Some("1".into())));
    // Without the semicolon the nested block is a syntax error, as in PostgreSQL.
    assert!(parse_body("BEGIN BEGIN NULL; END RETURN 1; END").is_err());
}

#[test]
fn cursor_statements_keep_their_parts() {
    let block = parse_body(
        "DECLARE
            c NO SCROLL CURSOR (a int, b numeric(10, 2)) FOR SELECT a, b;
        BEGIN
            OPEN c(1, b := 2.5);
            OPEN c;
            OPEN r SCROLL FOR SELECT * FROM t;
            OPEN r FOR EXECUTE 'SELECT ' || n USING n, m;
            FETCH c INTO x;
            FETCH RELATIVE -2 FROM c INTO x, y;
            FETCH LAST c INTO x;
            MOVE BACKWARD ALL IN c;
            CLOSE c;
            FOR rec IN c(f(1, 2)) LOOP NULL; END LOOP;
            FOR rec IN SELECT 1 LOOP NULL; END LOOP;
        END",
    )
    .unwrap();
    assert_eq!(
        block.declarations[0],
        Declaration::Cursor {
            name: "c".into(),
            scroll: Some(false),
            arguments: vec![
                ("a".into(), "int".into()),
                ("b".into(), "numeric(10, 2)".into())
            ],
            query: "SELECT a, b".into(),
        }
    );
    let into = |targets: &[&str]| {
        Some(Into {
            strict: false,
            targets: targets.iter().map(|t| t.to_string()).collect(),
        })
    };
    assert_eq!(
        block.body[..9],
        [
            Stmt::Open {
                cursor: "c".into(),
                scroll: None,
                source: OpenSource::Bound(vec!["1".into(), "b := 2.5".into()]),
            },
            Stmt::Open {
                cursor: "c".into(),
                scroll: None,
                source: OpenSource::Bound(vec![]),
            },
            Stmt::Open {
                cursor: "r".into(),
                scroll: Some(true),
                source: OpenSource::Query("SELECT * FROM t".into()),
            },
            Stmt::Open {
                cursor: "r".into(),
                scroll: None,
                source: OpenSource::Execute {
                    command: "'SELECT ' || n".into(),
                    using: vec!["n".into(), "m".into()],
                },
            },
            Stmt::Fetch {
                direction: None,
                cursor: "c".into(),
                into: into(&["x"]),
            },
            Stmt::Fetch {
                direction: Some("RELATIVE -2".into()),
                cursor: "c".into(),
                into: into(&["x", "y"]),
            },
            Stmt::Fetch {
                direction: Some("LAST".into()),
                cursor: "c".into(),
                into: into(&["x"]),
            },
            Stmt::Fetch {
                direction: Some("BACKWARD ALL".into()),
                cursor: "c".into(),
                into: None,
            },
            Stmt::Close("c".into()),
        ]
    );
    assert!(matches!(
        &block.body[9],
        Stmt::ForCursor { target, cursor, arguments, .. }
            if target == "rec" && cursor == "c" && arguments == &["f(1, 2)".to_string()]
    ));
    assert!(matches!(&block.body[10], Stmt::ForQuery { .. }));
    assert!(parse_body("BEGIN FETCH c; END").is_err());
    assert!(parse_body("BEGIN MOVE c INTO x; END").is_err());
}
