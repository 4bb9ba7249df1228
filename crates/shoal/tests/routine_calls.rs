//! Calls of PL/pgSQL functions with bound parameters over the extended protocol, the way
//! drivers make them: named and unnamed statements, parameters the client declares in another
//! type than the function's, values that do not fit, NULL into a STRICT function. The answers
//! are checked against PostgreSQL 15 when it is installed.

mod support;

use support::postgres::Postgres;
use support::{connect_to, ShoalServer};
use tokio_postgres::types::Type;
use tokio_postgres::Client;

const SETUP: &str = "
    CREATE FUNCTION rc_inc(k int) RETURNS int LANGUAGE plpgsql AS $$ BEGIN RETURN k + 1; END $$;
    CREATE FUNCTION rc_big(k bigint) RETURNS bigint LANGUAGE plpgsql AS $$ BEGIN RETURN k * 2; END $$;
    CREATE FUNCTION rc_len(t text) RETURNS int LANGUAGE plpgsql AS $$ BEGIN RETURN length(t); END $$;
    CREATE FUNCTION rc_strict(k int) RETURNS int LANGUAGE plpgsql STRICT AS $$ BEGIN RETURN 7; END $$;
";

/// Each call's answer: its value as text, or `error SQLSTATE`.
async fn answers(addr: &str) -> Vec<String> {
    let client = connect_to(addr).await;
    client.batch_execute(SETUP).await.unwrap();
    let mut out = Vec::new();

    // One named statement run with several values: each execution sees its own.
    let inc = client.prepare("SELECT rc_inc($1)").await.unwrap();
    for k in [1i32, 41, -5, i32::MAX] {
        out.push(first_value(&client, &inc, &[&k]).await);
    }
    // Unnamed statements, parsed again for each call.
    for k in [10i32, 20] {
        let row = client.query_one("SELECT rc_inc($1)", &[&k]).await;
        out.push(match row {
            Ok(row) => row.get::<_, i32>(0).to_string(),
            Err(e) => format!("error {}", e.code().unwrap().code()),
        });
    }
    // A parameter declared smallint passed to an integer parameter.
    let small = client
        .prepare_typed("SELECT rc_inc($1)", &[Type::INT2])
        .await
        .unwrap();
    out.push(first_value(&client, &small, &[&300i16]).await);
    // An integer parameter into a bigint function, past the integer range on the way out.
    let big = client
        .prepare_typed("SELECT rc_big($1)", &[Type::INT4])
        .await
        .unwrap();
    out.push(first_value(&client, &big, &[&i32::MAX]).await);
    // Text, and a NULL into a STRICT function.
    let len = client.prepare("SELECT rc_len($1)").await.unwrap();
    out.push(first_value(&client, &len, &[&"héllo"]).await);
    let strict = client.prepare("SELECT rc_strict($1)").await.unwrap();
    out.push(first_value(&client, &strict, &[&None::<i32>]).await);
    out.push(first_value(&client, &strict, &[&Some(1i32)]).await);
    out
}

async fn first_value(
    client: &Client,
    statement: &tokio_postgres::Statement,
    params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
) -> String {
    match client.query_one(statement, params).await {
        Ok(row) => match row.columns()[0].type_() {
            &Type::INT8 => row.get::<_, i64>(0).to_string(),
            _ => match row.get::<_, Option<i32>>(0) {
                Some(v) => v.to_string(),
                None => "NULL".to_string(),
            },
        },
        Err(e) => format!("error {}", e.code().map_or("?", |c| c.code())),
    }
}

#[tokio::test]
async fn bound_parameters_reach_functions_as_postgresql_passes_them() {
    let expected = [
        "2",
        "42",
        "-4",
        "error 22003",
        "11",
        "21",
        "301",
        "4294967294",
        "5",
        "NULL",
        "7",
    ];
    if let Some(postgres) = Postgres::start() {
        assert_eq!(
            answers(&postgres.addr).await,
            expected,
            "PostgreSQL 15 no longer answers as this test says"
        );
    }
    let server = ShoalServer::start();
    let addr = format!("127.0.0.1:{}", server.port());
    assert_eq!(
        answers(&addr).await,
        expected,
        "Shoal differs from PostgreSQL 15"
    );
}
