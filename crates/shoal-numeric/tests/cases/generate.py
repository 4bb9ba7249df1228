"""Regenerates the PostgreSQL answer tables in this directory (basic.rs, encoding.rs,
functions.rs) by running every case against a PostgreSQL 15 server, so the tests hold
PostgreSQL's own outputs. Start a throwaway server listening on the socket directory
/tmp/pgnum, port 55499 (see the crate's tests), run `python3 generate.py`, then `cargo fmt`.
"""
import os
import subprocess
HERE = os.path.dirname(os.path.abspath(__file__))
def pg(sql):
    r = subprocess.run(["psql","-h","/tmp/pgnum","-p","55499","-U","postgres","-v","VERBOSITY=sqlstate","-XAtc",sql],capture_output=True,text=True)
    if r.returncode != 0 or r.stderr.strip():
        err = r.stderr.strip().splitlines()[0]
        return "ERR " + err.split()[-1]
    return r.stdout.rstrip("\n")
def lit(s): return "'" + s.replace("'", "''") + "'"
def rs(s): return '"' + s.replace('\\','\\\\').replace('"','\\"') + '"'

def squash(v):
    # Very long answers are kept as their length and both ends, to keep the case files readable.
    if len(v) > 240:
        return f"BIG {len(v)} {v[:40]} {v[-40:]}"
    return v


def generate_basic():
    out = []
    def table(name, rows, arity):
        t = {1:"(&str, &str)",2:"(&str, &str, &str)",3:"(&str, &str, &str, &str)"}[arity]
        out.append(f"pub const {name}: &[{t}] = &[")
        for r in rows:
            out.append("    (" + ", ".join(rs(x) for x in r[:-1]) + ", " + rs(squash(r[-1])) + "),")
        out.append("];\n")

    parse_inputs = ["0","0.0","1.50","-0","-0.00","1e3","1.5e-3","  12  ","\t-7.25\n",".5","5.","+.5e1","1E+2","1e 5","1.50e1","123e-1","-1.2345e-10",
      "NaN","nan"," -Infinity ","+inf","INF","infinity","-inf","99999999999999999999999999.99999999999999999999",
      "","  ","abc","1.2.3",".","-",".e1","1e","1e+","12 34","1x","-nan","+nan","0x10","1_000","1e-16383","1e-16384","1e131071","1e131072","1e1000000000","0.000000000000000000000000000001"]
    table("PARSE", [(s, pg(f"select {lit(s)}::numeric")) for s in parse_inputs], 1)

    pairs = [("1","3"),("1000000","3"),("0.5","1.5"),("999999999999999999999","1e21"),("1","7e-20"),("1.000","3"),("-7","2"),("7","-2"),("-7.5","2"),("7.5","-0.2"),
     ("123456789012345678901234567890.123456789","0.000000001"),("1e-20","3"),("2","3e-30"),("1e100","7"),("10","4"),("9999","10000"),("10000","9999"),("0","5"),("5","0"),("0.00","1.5"),
     ("1.23","4.5678"),("-0.001","0.0001"),("12345678901234567890","-98765.4321"),("1","1e-1000"),("NaN","1"),("1","NaN"),("Infinity","2"),("Infinity","-2"),("-Infinity","3"),
     ("Infinity","Infinity"),("Infinity","-Infinity"),("-Infinity","-Infinity"),("5","Infinity"),("-5","-Infinity"),("0","Infinity"),("Infinity","0"),("NaN","0"),("0.1","0.15"),("1e-10000","1e-10000"),("1e131071","10")]
    ops = [("ADD","+"),("SUB","-"),("MUL","*"),("DIV","/"),("MOD","%")]
    for name, op in ops:
        table(name, [(a,b,pg(f"select {lit(a)}::numeric {op} {lit(b)}::numeric")) for a,b in pairs], 2)
    table("DIV_TRUNC", [(a,b,pg(f"select div({lit(a)}::numeric, {lit(b)}::numeric)")) for a,b in pairs], 2)
    table("GCD", [(a,b,pg(f"select gcd({lit(a)}::numeric, {lit(b)}::numeric)")) for a,b in pairs[:25]], 2)
    table("LCM", [(a,b,pg(f"select lcm({lit(a)}::numeric, {lit(b)}::numeric)")) for a,b in pairs[:25]], 2)
    cmpvals = ["-Infinity","-1e10","-1.5","-1.50","-0.001","0","0.00","0.001","1","1.0","1.5","1e10","1.0000000001","Infinity","NaN"]
    table("CMP", [(a,b,pg(f"select case when {lit(a)}::numeric < {lit(b)}::numeric then '<' when {lit(a)}::numeric = {lit(b)}::numeric then '=' else '>' end")) for a in cmpvals for b in cmpvals], 2)

    rvals = ["1234.5","-1234.5","0.5","-0.5","1.5","-1.5","2.5","-2.5","0.45","-0.45","9.995","-9.995","99.5","0","0.000","123.456","-123.456","999999.9999","NaN","Infinity","-Infinity","0.0000000001"]
    scales = ["-3","-2","-1","0","1","2","3","5"]
    table("ROUND", [(v,s,pg(f"select round({lit(v)}::numeric, {s})")) for v in rvals for s in scales], 2)
    table("TRUNC", [(v,s,pg(f"select trunc({lit(v)}::numeric, {s})")) for v in rvals for s in scales], 2)
    table("CEIL", [(v,pg(f"select ceil({lit(v)}::numeric)")) for v in rvals], 1)
    table("FLOOR", [(v,pg(f"select floor({lit(v)}::numeric)")) for v in rvals], 1)
    table("SIGN", [(v,pg(f"select sign({lit(v)}::numeric)")) for v in rvals], 1)
    table("ABS_NEG", [(v,pg(f"select abs({lit(v)}::numeric)::text || ' ' || (-{lit(v)}::numeric)::text")) for v in rvals], 1)
    table("SCALES", [(v,pg(f"select coalesce(scale({lit(v)}::numeric)::text,'NULL') || ' ' || coalesce(min_scale({lit(v)}::numeric)::text,'NULL') || ' ' || trim_scale({lit(v)}::numeric)")) for v in rvals+["100.0","1.2300"]], 1)
    typmods = [("12345.678","5","2"),("123.456","5","2"),("999.995","5","2"),("999.994","5","2"),("-999.995","5","2"),("0.001","3","5"),("0.01","3","5"),("12345","2","-3"),("123456","2","-3"),("NaN","5","2"),("Infinity","5","2"),("-Infinity","3","0"),("0.5","1","0"),("9.5","1","0"),("0.00001","3","2"),("5","3","3"),("1","3","3"),("12.5","2","1")]
    def tm(v,p,s):
        r = subprocess.run(["psql","-h","/tmp/pgnum","-p","55499","-U","postgres","-XAtc",f"select {lit(v)}::numeric({p},{s})"],capture_output=True,text=True)
        if r.returncode != 0:
            lines = r.stderr.strip().splitlines()
            det = [l for l in lines if l.startswith("DETAIL:")]
            return "ERR " + lines[0].split("ERROR:")[1].strip() + (" | " + det[0][len("DETAIL:"):].strip() if det else "")
        return r.stdout.strip()
    table("TYPMOD", [(v,p,s,tm(v,p,s)) for v,p,s in typmods], 3)
    ints = ["0","2.5","-2.5","32767.4","32767.5","-32768.5","-32768.4","2147483647.49","2147483647.5","-2147483648.5","9223372036854775807.4","9223372036854775807.5","-9223372036854775808.5","1e30","NaN","Infinity","-Infinity","0.5","-0.5"]
    table("TO_INT", [(v, pg(f"select {lit(v)}::numeric::int2"), pg(f"select {lit(v)}::numeric::int4"), pg(f"select {lit(v)}::numeric::int8")) for v in ints], 3)
    open(os.path.join(HERE, "basic.rs"),"w").write("//! PostgreSQL 15's answers for parsing, arithmetic, comparison and rounding, generated by\n//! running each case against a PostgreSQL 15 server (\"ERR <sqlstate>\" marks an error).\n\n" + "\n".join(out))


def generate_enc():
    out=[]
    vals=["0","0.00","1.50","-1.50","1","10000","12345.6789","0.0001","0.00001","-0.000000012","99999999","1e20","123456789012345678901234567890.123456789","NaN","Infinity","-Infinity","1e-16383","-5.5e10","0.1"]
    out.append("pub const SEND: &[(&str, &str)] = &[")
    for v in vals:
        h = pg(f"select numeric_send({lit(v)}::numeric)")
        out.append(f"    ({rs(v)}, {rs(h[2:] if not h.startswith('ERR') else h)}),")
    out.append("];\n")
    open(os.path.join(HERE, "encoding.rs"),"w").write("//! PostgreSQL 15's `numeric_send` bytes (hex) for values, generated with a PostgreSQL 15 server.\n\n" + "\n".join(out))


def generate_trans():
    out=[]
    def table(name, rows, arity):
        t = {1:"(&str, &str)",2:"(&str, &str, &str)"}[arity]
        out.append(f"pub const {name}: &[{t}] = &[")
        for r in rows:
            out.append("    (" + ", ".join(rs(x) for x in r[:-1]) + ", " + rs(squash(r[-1])) + "),")
        out.append("];\n")
    sq=["2","1.000000000000003","0.0001","0","0.00","1e100","123456789012345678901234567890.123","0.5","3","99","10000","0.00000000000000000001","1.5e-30","2.0000000000000000000000000000000000001","-1","NaN","Infinity","-Infinity","7","15241578780673678515622620750190521","0.000123","1234567.891"]
    sq += ["1e131071","1e-16383"]
    table("SQRT",[(v,pg(f"select sqrt({lit(v)}::numeric)")) for v in sq],1)
    ex=["1","1234.5678","-1","0.5","0","-0.5","10","-10","100","-100","0.0001","2.302585092994046","5999","-5999","6000","-6000","1e-20","123.456789012345678901234567890","-1234.5678","700","0.693147180559945309417232121458","NaN","Infinity","-Infinity","3.5","-20.25","5999.99","-5999.5","0.00000000000000000000000000000000001"]
    table("EXP",[(v,pg(f"select exp({lit(v)}::numeric)")) for v in ex],1)
    ln=["2","10","0.5","1","1.0000001","0.9999999","1e-100","1e100","123456.789","0.001","1.1","0.9","1.05","2.718281828459045","0","-1","NaN","Infinity","-Infinity","1.000000000000000000001","5e-1000","99999999999999999999","0.12345678901234567890123456789","1e131071","1e-16383","1."+"0"*300+"1"]
    table("LN",[(v,pg(f"select ln({lit(v)}::numeric)")) for v in ln],1)
    table("LOG10",[(v,pg(f"select log({lit(v)}::numeric)")) for v in ln+["100","1000","0.01","1e50"]],1)
    lg=[("2","8"),("10","100"),("2","1024"),("3","10"),("0.5","0.125"),("1.5","7.2"),("10","0.001"),("1","10"),("1.0000001","2"),("100","1.0000001"),("2","0"),("-2","4"),("0","5"),("Infinity","5"),("5","Infinity"),("Infinity","Infinity"),("NaN","2"),("12345.678","98765.4321"),("2.5","1e-200"),("0.1","1e300"),("1."+"0"*300+"1","2"),("2","0."+"9"*200+"7")]
    table("LOG",[(b,x,pg(f"select log({lit(b)}::numeric, {lit(x)}::numeric)")) for b,x in lg],2)
    pw=[("2","0.5"),("2","-3"),("-2","3"),("1.5","2.5"),("10","20"),("0.5","100"),("2","20"),("2","0"),("0","0"),("0","5"),("0","-1"),("0","0.5"),("-2","0.5"),("-2","-3"),("1.5","2"),("1.1","100"),("1.1","1000"),("1.0001","10000"),("9","0.5"),("2","3.3"),("3.7","-1.5"),("12.34","5.67"),("0.001","0.0001"),("10","-20"),("2","1000"),("2","-1000"),("1.000001","1000000"),("-1","1000000001"),("-1.5","2147483648"),("0.9","1000000"),("0.5","100000.5"),("9","1000000"),("10","131071.5"),("2","1"),("2","-1"),("7","2"),("1.23456789","1"),("3","-2"),("-3","-1"),("2.0","3"),("4","0.5"),("100","1.5"),("9.99","30000"),("1.0000001","2147483647"),("-1.0000001","2147483647"),("0.5","2147483647"),("2","2147483648"),("0.999","2147483648"),("1","1e100"),("1.1","1e100"),("0.9","1e100"),("3","-1000"),("1."+"0"*300+"1","2.5"),
     ("NaN","0"),("1","NaN"),("NaN","1"),("2","NaN"),("Infinity","2"),("Infinity","-2"),("-Infinity","3"),("-Infinity","2"),("-Infinity","-3"),("2","Infinity"),("0.5","Infinity"),("2","-Infinity"),("0.5","-Infinity"),("-1","Infinity"),("-2","Infinity"),("0","-Infinity"),("1","Infinity"),("Infinity","0"),("-Infinity","0.5"),("-2","-Infinity")]
    table("POWER",[(b,x,pg(f"select {lit(b)}::numeric ^ {lit(x)}::numeric")) for b,x in pw],2)
    fl=["0","1.23456789012345678","1e300","1.5e-300","0.1","123456789","-0.0","1e-320","1.7976931348623157e308","5e-324","0.3","2.5","1000000000000005","-1234.5678","NaN","Infinity","-Infinity","123456789012345678"]
    table("FROM_F64",[(v,pg(f"select {lit(v)}::float8::numeric")) for v in fl],1)
    table("FROM_F32",[(v,pg(f"select {lit(v)}::float4::numeric")) for v in ["0","0.1","123456789","1.5","3.4028235e38","1e-45","-2.5e-10","NaN","-Infinity","16777217","0.333333333"]],1)
    tf=["0","1.5","0.1","12345678901234567890.123456789","1e-320","1e-400","1e400","1e308","-1.7976931348623157e308","1.797693134862316e308","2.4703282292062328e-324","2.4703282292062327e-324","NaN","Infinity","-Infinity","0.3","9007199254740993","1e-310"]
    table("TO_F64",[(v,pg(f"select {lit(v)}::numeric::float8::text")) for v in tf],1)
    table("TO_F32",[(v,pg(f"select {lit(v)}::numeric::float4::text")) for v in ["0","1.5","0.1","1e40","1e-50","3.4028235e38","3.4028236e38","1e-45","16777217","NaN"]],1)
    sets=[["1.5","2","2"],["1","2"],["1e-30","2"],["1.5","2","2.25"],["1.5"],["1e20","3"],["1e-20","3e-20"],["1","2","3","4","5","6","7","8","9","10"],["0.001","0.002","0.0030"],["-5","5"],["3","3","3"],["1","NaN"],["1","Infinity","2"],["123456789.123","-987654321.987654321","0.000000001"]]
    def agg(vals):
        v=",".join(f"({lit(x)}::numeric)" for x in vals)
        r=pg(f"select coalesce(avg(x)::text,'NULL')||' '||coalesce(var_samp(x)::text,'NULL')||' '||coalesce(var_pop(x)::text,'NULL')||' '||coalesce(stddev_samp(x)::text,'NULL')||' '||coalesce(stddev_pop(x)::text,'NULL') from (values {v}) t(x)")
        return r
    table("AGG",[(" ".join(s),agg(s)) for s in sets],1)
    open(os.path.join(HERE, "functions.rs"),"w").write("//! PostgreSQL 15's answers for the numeric functions (sqrt, exp, ln, log, power), the float\n//! casts and the aggregates' final functions, generated with a PostgreSQL 15 server.\n\n" + "\n".join(out))


if __name__ == "__main__":
    generate_basic()
    generate_enc()
    generate_trans()
