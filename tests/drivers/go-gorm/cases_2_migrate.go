package main

// AutoMigrate and the Migrator: creating tables with associations, indexes and constraints,
// migrating again after a model changed (GORM reads the catalogs to decide what to alter), and
// the Migrator's own operations.

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"gorm.io/gorm"
)

// ddlSince is the DDL GORM ran after mark (CREATE, ALTER, DROP, COMMENT).
func ddlSince(t *T, mark int) []string {
	out := []string{}
	for _, s := range t.log.since(mark) {
		u := strings.ToUpper(strings.TrimSpace(s))
		for _, p := range []string{"CREATE ", "ALTER ", "DROP ", "COMMENT "} {
			if strings.HasPrefix(u, p) {
				out = append(out, s)
				break
			}
		}
	}
	return out
}

func optStr[V any](v V, ok bool) string {
	if !ok {
		return "-"
	}
	return fmt.Sprint(v)
}

// columnsOf renders what Migrator().ColumnTypes says of each column, sorted by name.
func columnsOf(t *T, db *gorm.DB, model any) []string {
	cts, err := db.Migrator().ColumnTypes(model)
	t.must(err, "ColumnTypes")
	out := []string{}
	for _, c := range cts {
		length, lok := c.Length()
		prec, scale, pok := c.DecimalSize()
		null, nok := c.Nullable()
		pk, pkok := c.PrimaryKey()
		uniq, uok := c.Unique()
		auto, aok := c.AutoIncrement()
		def, dok := c.DefaultValue()
		comment, cok := c.Comment()
		ct, _ := c.ColumnType()
		p := "-"
		if pok {
			p = fmt.Sprintf("%d,%d", prec, scale)
		}
		out = append(out, fmt.Sprintf("%s %s %q len=%s prec=%s null=%s pk=%s uniq=%s auto=%s default=%s comment=%s",
			c.Name(), c.DatabaseTypeName(), ct, optStr(length, lok), p, optStr(null, nok), optStr(pk, pkok),
			optStr(uniq, uok), optStr(auto, aok), optStr(def, dok), optStr(comment, cok)))
	}
	sort.Strings(out)
	return out
}

// The associations GORM knows: belongs-to, has-one, has-many and many2many.
type AmCompany struct {
	ID   uint
	Name string `gorm:"size:100;not null"`
}

type AmUser struct {
	ID        uint
	Name      string `gorm:"size:64;not null"`
	CompanyID *uint
	Company   AmCompany
	Profile   AmProfile
	Posts     []AmPost
	Languages []AmLanguage `gorm:"many2many:am_user_languages"`
	CreatedAt time.Time
}

type AmProfile struct {
	ID       uint
	AmUserID uint `gorm:"uniqueIndex"`
	Bio      string
}

type AmPost struct {
	ID       uint
	AmUserID uint `gorm:"index"`
	Title    string
}

type AmLanguage struct {
	ID   uint
	Code string `gorm:"size:8;uniqueIndex"`
}

func automigrateAssociations(t *T) {
	db := t.open()
	models := []any{&AmCompany{}, &AmUser{}, &AmProfile{}, &AmPost{}, &AmLanguage{}}
	t.migrate(db, models...)
	tables, err := db.Migrator().GetTables()
	t.must(err, "GetTables")
	am := []string{}
	for _, name := range tables {
		if strings.HasPrefix(name, "am_") {
			am = append(am, name)
		}
	}
	sort.Strings(am)
	eq(am, []string{"am_companies", "am_languages", "am_posts", "am_profiles", "am_user_languages", "am_users"}, "GetTables")
	for _, m := range append(models, "am_user_languages") {
		if !db.Migrator().HasTable(m) {
			fail("HasTable(%T %v) is false", m, m)
		}
	}
	if db.Migrator().HasTable("am_nothing") {
		fail("HasTable(am_nothing) is true")
	}
	eq([]bool{db.Migrator().HasColumn(&AmUser{}, "CompanyID"), db.Migrator().HasColumn(&AmUser{}, "company_id"),
		db.Migrator().HasColumn(&AmUser{}, "Profile")}, []bool{true, true, false}, "HasColumn company_id, Profile")
	eq([]bool{db.Migrator().HasConstraint(&AmUser{}, "Company"), db.Migrator().HasConstraint(&AmUser{}, "Posts"),
		db.Migrator().HasConstraint(&AmPost{}, "fk_am_users_posts"), db.Migrator().HasConstraint(&AmUser{}, "fk_nothing")},
		[]bool{true, true, true, false}, "HasConstraint Company, Posts, fk_am_users_posts, fk_nothing")
	type con struct {
		Tab, Name, Def string
	}
	var cons []con
	t.raw(db, &cons, `SELECT c.conrelid::regclass::text AS tab, c.conname AS name, pg_get_constraintdef(c.oid) AS def
		FROM pg_constraint c JOIN pg_class r ON r.oid = c.conrelid
		WHERE r.relname LIKE 'am\_%' ORDER BY 1, 2`)
	eq(cons, []con{
		{"am_companies", "am_companies_pkey", "PRIMARY KEY (id)"},
		{"am_languages", "am_languages_pkey", "PRIMARY KEY (id)"},
		{"am_posts", "am_posts_pkey", "PRIMARY KEY (id)"},
		{"am_posts", "fk_am_users_posts", "FOREIGN KEY (am_user_id) REFERENCES am_users(id)"},
		{"am_profiles", "am_profiles_pkey", "PRIMARY KEY (id)"},
		{"am_profiles", "fk_am_users_profile", "FOREIGN KEY (am_user_id) REFERENCES am_users(id)"},
		{"am_user_languages", "am_user_languages_pkey", "PRIMARY KEY (am_user_id, am_language_id)"},
		{"am_user_languages", "fk_am_user_languages_am_language", "FOREIGN KEY (am_language_id) REFERENCES am_languages(id)"},
		{"am_user_languages", "fk_am_user_languages_am_user", "FOREIGN KEY (am_user_id) REFERENCES am_users(id)"},
		{"am_users", "am_users_pkey", "PRIMARY KEY (id)"},
		{"am_users", "fk_am_users_company", "FOREIGN KEY (company_id) REFERENCES am_companies(id)"},
	}, "constraints in pg_constraint")
	// An application migrates at every start: the second time there is nothing to do.
	mark := t.log.mark()
	t.migrate(db, models...)
	eq(ddlSince(t, mark), []string{}, "DDL of the second AutoMigrate")
	// The foreign keys hold.
	err = db.Create(&AmPost{AmUserID: 77, Title: "orphan"}).Error
	if !errors.Is(err, gorm.ErrForeignKeyViolated) {
		fail("post of a missing user: got %v, want gorm.ErrForeignKeyViolated", err)
	}
	pe := pgErr(err, "23503", "post of a missing user")
	eq(pe.ConstraintName, "fk_am_users_posts", "constraint of the violation")
}

// Indexes from tags: single, unique, composite with priorities, sorted, partial and on an
// expression.
type IxAccount struct {
	ID        uint
	Email     string         `gorm:"size:120;uniqueIndex"`
	First     string         `gorm:"size:40;index:idx_ix_name,priority:2"`
	Last      string         `gorm:"size:40;index:idx_ix_name,priority:1"`
	Code      string         `gorm:"size:16;uniqueIndex:idx_ix_code_region"`
	Region    string         `gorm:"size:16;uniqueIndex:idx_ix_code_region"`
	Score     int            `gorm:"index:,sort:desc"`
	Status    string         `gorm:"size:10;index:idx_ix_active,where:status = 'active'"`
	Nick      string         `gorm:"size:30;index:idx_ix_nick_lower,expression:lower(nick)"`
	DeletedAt gorm.DeletedAt `gorm:"index"`
}

func automigrateIndexes(t *T) {
	db := t.open()
	t.migrate(db, &IxAccount{})
	type ix struct{ Indexname, Indexdef string }
	var got []ix
	t.raw(db, &got, "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = ? ORDER BY indexname", "ix_accounts")
	eq(got, []ix{
		{"idx_ix_accounts_deleted_at", "CREATE INDEX idx_ix_accounts_deleted_at ON public.ix_accounts USING btree (deleted_at)"},
		{"idx_ix_accounts_email", "CREATE UNIQUE INDEX idx_ix_accounts_email ON public.ix_accounts USING btree (email)"},
		{"idx_ix_accounts_score", "CREATE INDEX idx_ix_accounts_score ON public.ix_accounts USING btree (score DESC)"},
		{"idx_ix_active", "CREATE INDEX idx_ix_active ON public.ix_accounts USING btree (status) WHERE ((status)::text = 'active'::text)"},
		{"idx_ix_code_region", "CREATE UNIQUE INDEX idx_ix_code_region ON public.ix_accounts USING btree (code, region)"},
		{"idx_ix_name", "CREATE INDEX idx_ix_name ON public.ix_accounts USING btree (last, first)"},
		{"idx_ix_nick_lower", "CREATE INDEX idx_ix_nick_lower ON public.ix_accounts USING btree (lower((nick)::text))"},
		{"ix_accounts_pkey", "CREATE UNIQUE INDEX ix_accounts_pkey ON public.ix_accounts USING btree (id)"},
	}, "pg_indexes")
	m := db.Migrator()
	eq([]bool{m.HasIndex(&IxAccount{}, "Email"), m.HasIndex(&IxAccount{}, "idx_ix_name"), m.HasIndex(&IxAccount{}, "idx_ix_code_region"),
		m.HasIndex(&IxAccount{}, "idx_ix_nothing")}, []bool{true, true, true, false}, "HasIndex Email, idx_ix_name, idx_ix_code_region, idx_ix_nothing")
	indexes, err := m.GetIndexes(&IxAccount{})
	t.must(err, "GetIndexes")
	var described []string
	for _, i := range indexes {
		cols := append([]string(nil), i.Columns()...)
		sort.Strings(cols)
		uniq, _ := i.Unique()
		pk, _ := i.PrimaryKey()
		described = append(described, fmt.Sprintf("%s %s unique=%v pk=%v %v", i.Table(), i.Name(), uniq, pk, cols))
	}
	sort.Strings(described)
	eq(described, []string{
		"ix_accounts idx_ix_accounts_deleted_at unique=false pk=false [deleted_at]",
		"ix_accounts idx_ix_accounts_email unique=true pk=false [email]",
		"ix_accounts idx_ix_accounts_score unique=false pk=false [score]",
		"ix_accounts idx_ix_active unique=false pk=false [status]",
		"ix_accounts idx_ix_code_region unique=true pk=false [code region]",
		"ix_accounts idx_ix_name unique=false pk=false [first last]",
	}, "GetIndexes")
	mark := t.log.mark()
	t.migrate(db, &IxAccount{})
	eq(ddlSince(t, mark), []string{}, "DDL of the second AutoMigrate")
	t.create(db, &IxAccount{Email: "a@x", Code: "c1", Region: "eu"})
	t.create(db, &IxAccount{Email: "b@x", Code: "c1", Region: "us"})
	err = db.Create(&IxAccount{Email: "c@x", Code: "c1", Region: "eu"}).Error
	if !errors.Is(err, gorm.ErrDuplicatedKey) {
		fail("duplicate (code, region): got %v, want gorm.ErrDuplicatedKey", err)
	}
	eq(pgErr(err, "23505", "duplicate (code, region)").ConstraintName, "idx_ix_code_region", "constraint of the violation")
}

// A model, then the same table with a longer string, a wider integer, a string made text,
// a new NOT NULL column with a default, a new boolean with a default and a new time.
type MgItemV1 struct {
	ID    uint
	Name  string `gorm:"size:50"`
	Qty   int32
	Note  string `gorm:"size:20"`
	Price float64
}

func (MgItemV1) TableName() string { return "mg_items" }

type MgItemV2 struct {
	ID        uint
	Name      string `gorm:"size:120"`
	Qty       int64
	Note      string `gorm:"type:text"`
	Price     float64
	Email     string `gorm:"size:200;not null;default:'none'"`
	Active    bool   `gorm:"default:true"`
	CreatedAt time.Time
}

func (MgItemV2) TableName() string { return "mg_items" }

func automigrateChangedModel(t *T) {
	db := t.open()
	t.migrate(db, &MgItemV1{})
	eq(columnsOf(t, db, &MgItemV1{}), []string{
		`id int8 "bigint" len=64 prec=64,0 null=false pk=true uniq=false auto=true default=- comment=-`,
		`name varchar "character varying(50)" len=50 prec=- null=true pk=false uniq=false auto=- default=- comment=-`,
		`note varchar "character varying(20)" len=20 prec=- null=true pk=false uniq=false auto=- default=- comment=-`,
		`price numeric "numeric" len=- prec=65535,65531 null=true pk=false uniq=false auto=- default=- comment=-`,
		`qty int4 "integer" len=32 prec=32,0 null=true pk=false uniq=false auto=- default=- comment=-`,
	}, "ColumnTypes of v1")
	t.create(db, []MgItemV1{{Name: "bolt", Qty: 3, Note: "short", Price: 1.25}, {Name: "nut", Qty: 40, Price: 0.5}})
	mark := t.log.mark()
	t.migrate(db, &MgItemV2{})
	eq(ddlSince(t, mark), []string{
		`ALTER TABLE "mg_items" ALTER COLUMN "name" TYPE varchar(120) USING "name"::varchar(120)`,
		`ALTER TABLE "mg_items" ALTER COLUMN "qty" TYPE bigint USING "qty"::bigint`,
		`ALTER TABLE "mg_items" ALTER COLUMN "note" TYPE text USING "note"::text`,
		`ALTER TABLE "mg_items" ADD "email" varchar(200) NOT NULL DEFAULT 'none'`,
		`ALTER TABLE "mg_items" ADD "active" boolean DEFAULT true`,
		`ALTER TABLE "mg_items" ADD "created_at" timestamptz`,
	}, "DDL of AutoMigrate(v2)")
	eq(columnsOf(t, db, &MgItemV2{}), []string{
		`active bool "boolean" len=8 prec=- null=true pk=false uniq=false auto=- default=true comment=-`,
		`created_at timestamptz "timestamp with time zone" len=64 prec=6,0 null=true pk=false uniq=false auto=- default=- comment=-`,
		`email varchar "character varying(200)" len=200 prec=- null=false pk=false uniq=false auto=- default=none comment=-`,
		`id int8 "bigint" len=64 prec=64,0 null=false pk=true uniq=false auto=true default=- comment=-`,
		`name varchar "character varying(120)" len=120 prec=- null=true pk=false uniq=false auto=- default=- comment=-`,
		`note text "text" len=9223372036854775807 prec=- null=true pk=false uniq=false auto=- default=- comment=-`,
		`price numeric "numeric" len=- prec=65535,65531 null=true pk=false uniq=false auto=- default=- comment=-`,
		`qty int8 "bigint" len=64 prec=64,0 null=true pk=false uniq=false auto=- default=- comment=-`,
	}, "ColumnTypes of v2")
	var items []MgItemV2
	t.must(db.Order("id").Find(&items).Error, "Find v2")
	if len(items) != 2 {
		fail("rows after the migration: %+v", items)
	}
	eq([]any{items[0].Name, items[0].Qty, items[0].Note, items[0].Price, items[0].Email, items[0].Active, items[0].CreatedAt.IsZero()},
		[]any{"bolt", int64(3), "short", 1.25, "none", true, true}, "first row after the migration")
	eq([]any{items[1].Name, items[1].Note, items[1].Price}, []any{"nut", "", 0.5}, "second row after the migration")
	long := strings.Repeat("n", 120)
	t.create(db, &MgItemV2{Name: long, Qty: 1 << 40, Email: "e@x", Active: false})
	var back MgItemV2
	t.must(db.Where("qty = ?", int64(1)<<40).First(&back).Error, "First by a bigint")
	eq([]any{back.Name, back.Email, back.Active}, []any{long, "e@x", true}, "a false bool with a default true is left to the default")
	mark = t.log.mark()
	t.migrate(db, &MgItemV2{})
	eq(ddlSince(t, mark), []string{}, "DDL of the second AutoMigrate(v2)")
}

// Every common column type, migrated twice: GORM compares the model with what the catalogs
// say, and the second time finds nothing to change.
type NoopAll struct {
	ID        uint
	Code      string `gorm:"size:32;not null;unique"`
	Title     string `gorm:"type:text;default:'untitled'"`
	Small     int16  `gorm:"default:0"`
	Medium    int32  `gorm:"not null;default:7"`
	Big       int64  `gorm:"check:big >= 0"`
	Unsigned  uint32
	Ratio     float32
	Amount    float64 `gorm:"type:numeric(12,2)"`
	Exact     string  `gorm:"type:numeric(20,4)"`
	Flag      bool    `gorm:"not null;default:false"`
	At        time.Time
	Day       time.Time `gorm:"type:date"`
	Maybe     *time.Time
	Blob      []byte
	Ref       string         `gorm:"type:uuid"`
	Meta      map[string]any `gorm:"type:jsonb;serializer:json"`
	Notes     string         `gorm:"comment:free text"`
	Stamp     time.Time      `gorm:"default:CURRENT_TIMESTAMP"`
	CreatedAt time.Time
	UpdatedAt time.Time
	DeletedAt gorm.DeletedAt `gorm:"index"`
}

func automigrateAgainIsANoOp(t *T) {
	db := t.open()
	mark := t.log.mark()
	t.migrate(db, &NoopAll{})
	eq(ddlSince(t, mark), []string{
		`CREATE TABLE "noop_alls" ("id" bigserial,"code" varchar(32) NOT NULL,"title" text DEFAULT 'untitled',"small" smallint DEFAULT 0,` +
			`"medium" integer NOT NULL DEFAULT 7,"big" bigint,"unsigned" bigint,"ratio" decimal,"amount" numeric(12,2),"exact" numeric(20,4),` +
			`"flag" boolean NOT NULL DEFAULT false,"at" timestamptz,"day" date,"maybe" timestamptz,"blob" bytea,` +
			`"ref" uuid,"meta" jsonb,"notes" text,"stamp" timestamptz DEFAULT CURRENT_TIMESTAMP,"created_at" timestamptz,` +
			`"updated_at" timestamptz,"deleted_at" timestamptz,PRIMARY KEY ("id"),CONSTRAINT "uni_noop_alls_code" UNIQUE ("code"),` +
			`CONSTRAINT "chk_noop_alls_big" CHECK (big >= 0))`,
		`CREATE INDEX IF NOT EXISTS "idx_noop_alls_deleted_at" ON "noop_alls" ("deleted_at")`,
		`COMMENT ON COLUMN "noop_alls"."notes" IS 'free text'`,
	}, "DDL of the first AutoMigrate")
	eq(columnsOf(t, db, &NoopAll{}), []string{
		`amount numeric "numeric(12,2)" len=- prec=12,2 null=true pk=false uniq=false auto=- default=- comment=-`,
		`at timestamptz "timestamp with time zone" len=64 prec=6,0 null=true pk=false uniq=false auto=- default=- comment=-`,
		`big int8 "bigint" len=64 prec=64,0 null=true pk=false uniq=false auto=- default=- comment=-`,
		`blob bytea "bytea" len=9223372036854775807 prec=- null=true pk=false uniq=false auto=- default=- comment=-`,
		`code varchar "character varying(32)" len=32 prec=- null=false pk=false uniq=true auto=- default=- comment=-`,
		`created_at timestamptz "timestamp with time zone" len=64 prec=6,0 null=true pk=false uniq=false auto=- default=- comment=-`,
		`day date "date" len=32 prec=0,0 null=true pk=false uniq=false auto=- default=- comment=-`,
		`deleted_at timestamptz "timestamp with time zone" len=64 prec=6,0 null=true pk=false uniq=false auto=- default=- comment=-`,
		`exact numeric "numeric(20,4)" len=- prec=20,4 null=true pk=false uniq=false auto=- default=- comment=-`,
		`flag bool "boolean" len=8 prec=- null=false pk=false uniq=false auto=- default=false comment=-`,
		`id int8 "bigint" len=64 prec=64,0 null=false pk=true uniq=false auto=true default=- comment=-`,
		`maybe timestamptz "timestamp with time zone" len=64 prec=6,0 null=true pk=false uniq=false auto=- default=- comment=-`,
		`medium int4 "integer" len=32 prec=32,0 null=false pk=false uniq=false auto=- default=7 comment=-`,
		`meta jsonb "jsonb" len=- prec=- null=true pk=false uniq=false auto=- default=- comment=-`,
		`notes text "text" len=9223372036854775807 prec=- null=true pk=false uniq=false auto=- default=- comment=free text`,
		`ratio numeric "numeric" len=- prec=65535,65531 null=true pk=false uniq=false auto=- default=- comment=-`,
		`ref uuid "uuid" len=128 prec=- null=true pk=false uniq=false auto=- default=- comment=-`,
		`small int2 "smallint" len=16 prec=16,0 null=true pk=false uniq=false auto=- default=0 comment=-`,
		`stamp timestamptz "timestamp with time zone" len=64 prec=6,0 null=true pk=false uniq=false auto=- default=CURRENT_TIMESTAMP comment=-`,
		`title text "text" len=9223372036854775807 prec=- null=true pk=false uniq=false auto=- default=untitled comment=-`,
		`unsigned int8 "bigint" len=64 prec=64,0 null=true pk=false uniq=false auto=- default=- comment=-`,
		`updated_at timestamptz "timestamp with time zone" len=64 prec=6,0 null=true pk=false uniq=false auto=- default=- comment=-`,
	}, "ColumnTypes")
	for i := 0; i < 2; i++ {
		mark = t.log.mark()
		t.migrate(db, &NoopAll{})
		eq(ddlSince(t, mark), []string{}, fmt.Sprintf("DDL of AutoMigrate number %d", i+2))
	}
}

// The Migrator's own operations, as hand-written migrations use them.
type MoThing struct {
	ID      uint
	OldName string `gorm:"size:30"`
	Legacy  int
	Qty     int32
}

func (MoThing) TableName() string { return "mo_things" }

type MoThingV2 struct {
	ID      uint
	NewName string `gorm:"size:30"`
	Qty     int64  `gorm:"not null;default:1;check:chk_mo_qty,qty > 0"`
	Extra   string `gorm:"size:10;index:idx_mo_extra"`
}

func (MoThingV2) TableName() string { return "mo_things" }

func migratorOperations(t *T) {
	db := t.open()
	m := db.Migrator()
	t.must(m.CreateTable(&MoThing{}), "CreateTable")
	if !m.HasTable(&MoThing{}) || !m.HasTable("mo_things") {
		fail("HasTable after CreateTable is false")
	}
	t.create(db, &MoThing{OldName: "a", Legacy: 5, Qty: 2})
	mark := t.log.mark()
	t.must(m.RenameColumn(&MoThing{}, "old_name", "new_name"), "RenameColumn")
	eq([]bool{m.HasColumn(&MoThing{}, "old_name"), m.HasColumn(&MoThingV2{}, "new_name"), m.HasColumn(&MoThingV2{}, "NewName")},
		[]bool{false, true, true}, "HasColumn old_name, new_name, NewName after RenameColumn")
	t.must(m.DropColumn(&MoThing{}, "Legacy"), "DropColumn")
	eq(m.HasColumn(&MoThing{}, "legacy"), false, "HasColumn legacy after DropColumn")
	t.must(m.AddColumn(&MoThingV2{}, "Extra"), "AddColumn")
	eq(m.HasColumn(&MoThingV2{}, "extra"), true, "HasColumn extra after AddColumn")
	t.must(m.AlterColumn(&MoThingV2{}, "Qty"), "AlterColumn")
	eq(ddlSince(t, mark), []string{
		`ALTER TABLE "mo_things" RENAME COLUMN "old_name" TO "new_name"`,
		`ALTER TABLE "mo_things" DROP COLUMN "legacy"`,
		`ALTER TABLE "mo_things" ADD "extra" varchar(10)`,
		`ALTER TABLE "mo_things" ALTER COLUMN "qty" TYPE bigint USING "qty"::bigint`,
		`ALTER TABLE "mo_things" ALTER COLUMN "qty" SET NOT NULL`,
		`ALTER TABLE "mo_things" ALTER COLUMN "qty" SET DEFAULT 1`,
	}, "DDL of the column operations")
	eq(columnsOf(t, db, &MoThingV2{}), []string{
		`extra varchar "character varying(10)" len=10 prec=- null=true pk=false uniq=false auto=- default=- comment=-`,
		`id int8 "bigint" len=64 prec=64,0 null=false pk=true uniq=false auto=true default=- comment=-`,
		`new_name varchar "character varying(30)" len=30 prec=- null=true pk=false uniq=false auto=- default=- comment=-`,
		`qty int8 "bigint" len=64 prec=64,0 null=false pk=false uniq=false auto=- default=1 comment=-`,
	}, "ColumnTypes after the column operations")

	// Indexes: create, rename, drop.
	t.must(m.CreateIndex(&MoThingV2{}, "idx_mo_extra"), "CreateIndex")
	eq(m.HasIndex(&MoThingV2{}, "idx_mo_extra"), true, "HasIndex after CreateIndex")
	t.must(m.RenameIndex(&MoThingV2{}, "idx_mo_extra", "idx_mo_extra_2"), "RenameIndex")
	eq([]bool{m.HasIndex(&MoThingV2{}, "idx_mo_extra"), m.HasIndex(&MoThingV2{}, "idx_mo_extra_2")}, []bool{false, true},
		"HasIndex old, new after RenameIndex")
	t.must(m.DropIndex(&MoThingV2{}, "idx_mo_extra_2"), "DropIndex")
	eq(m.HasIndex(&MoThingV2{}, "idx_mo_extra_2"), false, "HasIndex after DropIndex")

	// A check constraint: create, violate, drop.
	t.must(m.CreateConstraint(&MoThingV2{}, "chk_mo_qty"), "CreateConstraint")
	eq(m.HasConstraint(&MoThingV2{}, "chk_mo_qty"), true, "HasConstraint after CreateConstraint")
	err := db.Create(&MoThingV2{NewName: "z", Qty: -1}).Error
	if !errors.Is(err, gorm.ErrCheckConstraintViolated) {
		fail("qty -1: got %v, want gorm.ErrCheckConstraintViolated", err)
	}
	eq(pgErr(err, "23514", "qty -1").ConstraintName, "chk_mo_qty", "constraint of the violation")
	t.must(m.DropConstraint(&MoThingV2{}, "chk_mo_qty"), "DropConstraint")
	eq(m.HasConstraint(&MoThingV2{}, "chk_mo_qty"), false, "HasConstraint after DropConstraint")
	t.create(db, &MoThingV2{NewName: "z", Qty: -1})
	t.create(db, &MoThingV2{NewName: "d"})
	var rows []MoThingV2
	t.must(db.Order("id").Find(&rows).Error, "Find")
	eq(rows, []MoThingV2{{1, "a", 2, ""}, {3, "z", -1, ""}, {4, "d", 1, ""}}, "rows after the migrations (the failed insert used id 2)")

	// Tables: rename, drop.
	t.must(m.RenameTable(&MoThingV2{}, "mo_renamed"), "RenameTable")
	eq([]bool{m.HasTable(&MoThingV2{}), m.HasTable("mo_renamed")}, []bool{false, true}, "HasTable old, new after RenameTable")
	var n int64
	t.must(db.Table("mo_renamed").Where("qty > ?", 0).Count(&n).Error, "Count in the renamed table")
	eq(n, int64(2), "rows with qty > 0 in the renamed table")
	t.must(m.DropTable("mo_renamed"), "DropTable")
	eq(m.HasTable("mo_renamed"), false, "HasTable after DropTable")
}

func init() {
	addCase("automigrate_associations", automigrateAssociations)
	addCase("automigrate_indexes", automigrateIndexes)
	addCase("automigrate_changed_model", automigrateChangedModel)
	addCase("automigrate_again_is_a_no_op", automigrateAgainIsANoOp)
	addCase("migrator_operations", migratorOperations)
}
