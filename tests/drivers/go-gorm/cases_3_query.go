package main

// Reading rows: First/Take/Last/Find, conditions, ordering and paging, grouping, joins and
// preloading of associations, scopes, Count and Pluck, Scan, Raw and Exec, Rows, soft
// deletes and hooks.

import (
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
	"gorm.io/gorm/schema"
)

type QfBook struct {
	ID     uint
	Title  string `gorm:"size:40"`
	Year   int
	Rating *float64 `gorm:"type:double precision"`
}

func qfSetup(t *T) *gorm.DB {
	db := t.open()
	t.migrate(db, &QfBook{})
	t.create(db, []QfBook{{Title: "Dune", Year: 1965, Rating: ptr(4.5)}, {Title: "Emma", Year: 1815},
		{Title: "Ulysses", Year: 1922, Rating: ptr(3.5)}, {Title: "Beloved", Year: 1987, Rating: ptr(4.5)},
		{Title: "Walden", Year: 1854, Rating: ptr(2.0)}})
	return db
}

func titles(books []QfBook) []string {
	out := []string{}
	for _, b := range books {
		out = append(out, b.Title)
	}
	return out
}

func queryFirstTakeLastFind(t *T) {
	db := qfSetup(t)
	var b QfBook
	t.must(db.First(&b).Error, "First")
	eq(b.Title, "Dune", "First")
	b = QfBook{}
	t.must(db.Last(&b).Error, "Last")
	eq(b.Title, "Walden", "Last")
	b = QfBook{}
	t.must(db.Take(&b).Error, "Take")
	if b.ID < 1 || b.ID > 5 {
		fail("Take gave %+v", b)
	}
	b = QfBook{}
	t.must(db.First(&b, 3).Error, "First(3)")
	eq([]any{b.Title, b.Year, *b.Rating}, []any{"Ulysses", 1922, 3.5}, "First(3)")
	b = QfBook{}
	t.must(db.First(&b, "title = ?", "Emma").Error, "First(title = Emma)")
	eq([]any{b.ID, b.Rating}, []any{uint(2), (*float64)(nil)}, "First(title = Emma)")
	b = QfBook{}
	t.must(db.Where("year > ?", 1900).Order("year DESC").First(&b).Error, "Where.Order.First")
	eq(b.Title, "Beloved", "the latest book")
	b = QfBook{}
	err := db.First(&b, 99).Error
	if !errors.Is(err, gorm.ErrRecordNotFound) {
		fail("First(99): got %v, want gorm.ErrRecordNotFound", err)
	}
	var books []QfBook
	r := db.Find(&books, []int{4, 1, 5})
	t.must(r.Error, "Find(ids)")
	sort.Slice(books, func(i, j int) bool { return books[i].ID < books[j].ID })
	eq([]any{r.RowsAffected, titles(books)}, []any{int64(3), []string{"Dune", "Beloved", "Walden"}}, "Find(ids)")
	r = db.Where("year < ?", 0).Find(&books)
	eq([]any{r.Error, r.RowsAffected, len(books)}, []any{nil, int64(0), 0}, "Find without rows")
	// Into maps: the Go types database/sql gives.
	var maps []map[string]any
	t.must(db.Table("qf_books").Where("id IN ?", []int{1, 2}).Order("id").Find(&maps).Error, "Find(maps)")
	if len(maps) != 2 {
		fail("maps: %+v", maps)
	}
	eq(maps[0], map[string]any{"id": int64(1), "title": "Dune", "year": int64(1965), "rating": 4.5}, "first map")
	eq(maps[1]["rating"], nil, "NULL in a map")
	// FirstOrInit and FirstOrCreate.
	b = QfBook{}
	t.must(db.Where(QfBook{Title: "Dune"}).Attrs(QfBook{Year: 1}).FirstOrInit(&b).Error, "FirstOrInit existing")
	eq([]any{b.ID, b.Year}, []any{uint(1), 1965}, "FirstOrInit finds the row")
	b = QfBook{}
	t.must(db.Where(QfBook{Title: "Middlemarch"}).Attrs(QfBook{Year: 1871}).FirstOrCreate(&b).Error, "FirstOrCreate new")
	eq([]any{b.ID, b.Title, b.Year}, []any{uint(6), "Middlemarch", 1871}, "FirstOrCreate creates")
	b = QfBook{}
	t.must(db.Where(QfBook{Title: "Middlemarch"}).Assign(QfBook{Year: 1872}).FirstOrCreate(&b).Error, "FirstOrCreate with Assign")
	var year int
	t.raw(db, &year, "SELECT year FROM qf_books WHERE id = 6")
	eq([]any{b.ID, year}, []any{uint(6), 1872}, "FirstOrCreate with Assign updates")
}

type WcPerson struct {
	ID      uint
	Name    string `gorm:"size:20"`
	Age     int
	City    *string `gorm:"size:20"`
	Active  bool
	Manager *uint
}

func whereConditions(t *T) {
	db := t.open()
	t.migrate(db, &WcPerson{})
	t.create(db, []WcPerson{{Name: "ann", Age: 30, City: ptr("Oslo"), Active: true}, {Name: "bob", Age: 25, City: ptr("Rome")},
		{Name: "cy", Age: 41, Active: true, Manager: ptr(uint(1))}, {Name: "dee", Age: 25, City: ptr("Oslo"), Active: true, Manager: ptr(uint(1))},
		{Name: "ed", Age: 60, City: ptr("Lima")}})
	names := func(q *gorm.DB, what string) []string {
		var out []string
		t.must(q.Model(&WcPerson{}).Order("id").Pluck("name", &out).Error, what)
		if out == nil {
			out = []string{}
		}
		return out
	}
	eq(names(db.Where(&WcPerson{Age: 25, Active: false}), "struct"), []string{"bob", "dee"}, "Where(struct): zero fields are left out")
	eq(names(db.Where(&WcPerson{Age: 25, Active: false}, "Age", "Active"), "struct with fields"), []string{"bob"}, "Where(struct, fields)")
	eq(names(db.Where(map[string]any{"age": 25, "active": false}), "map"), []string{"bob"}, "Where(map)")
	eq(names(db.Where(map[string]any{"city": nil}), "map nil"), []string{"cy"}, "Where(map with nil)")
	eq(names(db.Where("name IN ?", []string{"ann", "ed", "zed"}), "IN"), []string{"ann", "ed"}, "IN slice")
	eq(names(db.Where("age IN ?", []int{}), "IN empty"), []string{}, "IN an empty slice")
	eq(names(db.Where(map[string]any{"name": []string{"bob", "cy"}}), "map slice"), []string{"bob", "cy"}, "Where(map with a slice)")
	eq(names(db.Where([]int64{2, 4}), "primary keys"), []string{"bob", "dee"}, "Where(primary keys)")
	eq(names(db.Not("age = ?", 25), "Not"), []string{"ann", "cy", "ed"}, "Not")
	eq(names(db.Not(map[string]any{"name": []string{"ann", "bob"}}), "Not map"), []string{"cy", "dee", "ed"}, "Not(map slice)")
	eq(names(db.Where("age > ?", 40).Or("city = ?", "Rome"), "Or"), []string{"bob", "cy", "ed"}, "Or")
	eq(names(db.Where("name LIKE ?", "%e%"), "LIKE"), []string{"dee", "ed"}, "LIKE")
	eq(names(db.Where("age BETWEEN ? AND ?", 26, 50), "BETWEEN"), []string{"ann", "cy"}, "BETWEEN")
	eq(names(db.Where("city = @c OR manager = @m", sql.Named("c", "Lima"), sql.Named("m", 1)), "named"), []string{"cy", "dee", "ed"}, "named arguments")
	eq(names(db.Where("city = @c AND age < @a", map[string]any{"c": "Oslo", "a": 28}), "named map"), []string{"dee"}, "named arguments in a map")
	eq(names(db.Where("(name, age) IN ?", [][]any{{"ann", 30}, {"bob", 99}, {"ed", 60}}), "tuples"), []string{"ann", "ed"}, "(a, b) IN tuples")
	eq(names(db.Where("age > (?)", db.Model(&WcPerson{}).Select("avg(age)")), "subquery"), []string{"cy", "ed"}, "subquery")
	eq(names(db.Where("EXISTS (?)", db.Table("wc_people AS m").Select("1").Where("m.id = wc_people.manager AND m.city = ?", "Oslo")), "EXISTS"),
		[]string{"cy", "dee"}, "correlated EXISTS subquery")
	eq(names(db.Where(db.Where("age < ?", 30).Or("age > ?", 50)).Where("city IS NOT NULL"), "grouped"), []string{"bob", "dee", "ed"}, "grouped conditions")
	eq(names(db.Where(clause.Gt{Column: "age", Value: 40}).Where(clause.Like{Column: "name", Value: "e%"}), "clause"), []string{"ed"}, "clause.Gt, clause.Like")
	eq(names(db.Where("lower(?) = name", "ANN"), "param in an expression"), []string{"ann"}, "a parameter inside a function")
}

type OlScore struct {
	ID    uint
	Team  string `gorm:"size:10"`
	Name  string `gorm:"size:10"`
	Score int
}

func orderLimitOffsetGroup(t *T) {
	db := t.open()
	t.migrate(db, &OlScore{})
	t.create(db, []OlScore{{Team: "red", Name: "a", Score: 10}, {Team: "blue", Name: "b", Score: 30}, {Team: "red", Name: "c", Score: 30},
		{Team: "green", Name: "d", Score: 5}, {Team: "blue", Name: "e", Score: 20}, {Team: "red", Name: "f", Score: 25}})
	names := func(q *gorm.DB, what string) []string {
		var out []string
		t.must(q.Model(&OlScore{}).Pluck("name", &out).Error, what)
		return out
	}
	eq(names(db.Order("score DESC").Order("name"), "Order"), []string{"b", "c", "f", "e", "a", "d"}, "Order(score DESC).Order(name)")
	eq(names(db.Order(clause.OrderByColumn{Column: clause.Column{Name: "team"}, Desc: true}).Order("id"), "OrderByColumn"),
		[]string{"a", "c", "f", "d", "b", "e"}, "OrderByColumn desc")
	eq(names(db.Order("score DESC, id").Limit(2).Offset(1), "Limit Offset"), []string{"c", "f"}, "Limit(2).Offset(1)")
	eq(names(db.Order("id").Offset(4), "Offset"), []string{"e", "f"}, "Offset alone")
	eq(names(db.Order("id").Limit(3).Limit(-1), "Limit(-1)"), []string{"a", "b", "c", "d", "e", "f"}, "Limit(-1) cancels")
	eq(names(db.Order("id").Limit(0), "Limit(0)"), []string{}, "Limit(0)")
	var teams []string
	t.must(db.Model(&OlScore{}).Distinct("team").Order("team").Pluck("team", &teams).Error, "Distinct.Pluck")
	eq(teams, []string{"blue", "green", "red"}, "distinct teams")
	type agg struct {
		Team  string
		N     int64
		Total int64
		Avg   float64
		Best  int
	}
	var aggs []agg
	t.must(db.Model(&OlScore{}).Select("team, count(*) AS n, sum(score) AS total, avg(score) AS avg, max(score) AS best").
		Group("team").Having("count(*) > ?", 1).Order("total DESC").Scan(&aggs).Error, "Group.Having")
	eq(aggs, []agg{{"red", 3, 65, 65.0 / 3, 30}, {"blue", 2, 50, 25, 30}}, "Group.Having")
	var groups int64
	t.must(db.Model(&OlScore{}).Group("team").Count(&groups).Error, "Group.Count")
	eq(groups, int64(3), "Count of groups")
	var distinct int64
	t.must(db.Model(&OlScore{}).Distinct("score").Count(&distinct).Error, "Distinct.Count")
	eq(distinct, int64(5), "Count of distinct scores")
	var ranked []struct {
		Name string
		Rnk  int
	}
	t.must(db.Model(&OlScore{}).Select("name, rank() OVER (PARTITION BY team ORDER BY score DESC) AS rnk").Where("team = ?", "red").
		Order("rnk, name").Scan(&ranked).Error, "window function")
	eq(fmt.Sprint(ranked), "[{c 1} {f 2} {a 3}]", "rank() over the red team")
}

// Associations: belongs-to, has-one, has-many (with a nested has-many) and many2many.
type JpPublisher struct {
	ID   uint
	Name string `gorm:"size:30"`
}

type JpAuthor struct {
	ID          uint
	Name        string `gorm:"size:30"`
	PublisherID uint
	Publisher   JpPublisher
	Bio         JpBio
	Books       []JpBook
	Tags        []JpTag `gorm:"many2many:jp_author_tags"`
}

type JpBio struct {
	ID         uint
	JpAuthorID uint
	Text       string
}

type JpBook struct {
	ID         uint
	JpAuthorID uint
	Title      string `gorm:"size:30"`
	Pages      int
	Reviews    []JpReview
}

type JpReview struct {
	ID       uint
	JpBookID uint
	Stars    int
}

type JpTag struct {
	ID   uint
	Name string `gorm:"size:20;uniqueIndex"`
}

// jpSetup creates the tables with this prefix, and the authors with their associations.
func jpSetup(t *T, prefix string) *gorm.DB {
	db := t.open(func(o *openOptions) {
		o.config = func(c *gorm.Config) { c.NamingStrategy = schema.NamingStrategy{TablePrefix: prefix} }
	})
	t.migrate(db, &JpPublisher{}, &JpAuthor{}, &JpBio{}, &JpBook{}, &JpReview{}, &JpTag{})
	fiction := JpTag{Name: "fiction"}
	authors := []JpAuthor{
		{Name: "Austen", Publisher: JpPublisher{Name: "Egerton"}, Bio: JpBio{Text: "b. 1775"},
			Books: []JpBook{{Title: "Emma", Pages: 474, Reviews: []JpReview{{Stars: 5}, {Stars: 4}}}, {Title: "Persuasion", Pages: 249}},
			Tags:  []JpTag{fiction, {Name: "classic"}}},
		{Name: "Orwell", Publisher: JpPublisher{Name: "Secker"}, Bio: JpBio{Text: "b. 1903"},
			Books: []JpBook{{Title: "1984", Pages: 328, Reviews: []JpReview{{Stars: 3}}}}, Tags: []JpTag{{Name: "dystopia"}}},
		{Name: "Nobody", Publisher: JpPublisher{Name: "Self"}},
	}
	t.create(db, &authors)
	// An existing tag is linked.
	var fiction2 JpTag
	t.must(db.First(&fiction2, "name = ?", "fiction").Error, "First(fiction)")
	t.must(db.Model(&authors[1]).Association("Tags").Append(&fiction2), "Append an existing tag")
	return db
}

func joinsAndPreload(t *T) {
	db := jpSetup(t, "")
	var counts []int64
	for _, table := range []string{"jp_publishers", "jp_authors", "jp_bios", "jp_books", "jp_reviews", "jp_tags", "jp_author_tags"} {
		counts = append(counts, t.int(db, "SELECT count(*) FROM "+table))
	}
	eq(counts, []int64{3, 3, 2, 3, 3, 3, 4}, "rows saved with the associations")
	// Joins on belongs-to and has-one: one query, the columns under aliases.
	var authors []JpAuthor
	t.must(db.Joins("Publisher").Joins("Bio").Order("jp_authors.id").Find(&authors).Error, "Joins(Publisher, Bio)")
	got := []string{}
	for _, a := range authors {
		got = append(got, fmt.Sprintf("%s/%s/%s", a.Name, a.Publisher.Name, a.Bio.Text))
	}
	eq(got, []string{"Austen/Egerton/b. 1775", "Orwell/Secker/b. 1903", "Nobody/Self/"}, "joined publisher and bio")
	// InnerJoins with a condition on the joined table.
	authors = nil
	t.must(db.InnerJoins("Publisher", db.Where(&JpPublisher{Name: "Secker"})).Find(&authors).Error, "InnerJoins with a condition")
	eq(len(authors) == 1 && authors[0].Name == "Orwell" && authors[0].Publisher.ID != 0, true, "InnerJoins(Publisher, Secker)")
	// Preload has-many with an order, nested preload, many2many.
	authors = nil
	t.must(db.Preload("Books", func(q *gorm.DB) *gorm.DB { return q.Order("pages DESC") }).Preload("Books.Reviews", func(q *gorm.DB) *gorm.DB {
		return q.Order("stars")
	}).Preload("Tags", func(q *gorm.DB) *gorm.DB { return q.Order("name") }).Order("id").Find(&authors).Error, "Preload")
	got = []string{}
	for _, a := range authors {
		s := a.Name + ":"
		for _, b := range a.Books {
			s += fmt.Sprintf(" %s(%d)", b.Title, len(b.Reviews))
			for _, r := range b.Reviews {
				s += fmt.Sprint(r.Stars)
			}
		}
		s += " |"
		for _, tg := range a.Tags {
			s += " " + tg.Name
		}
		got = append(got, s)
	}
	eq(got, []string{"Austen: Emma(2)45 Persuasion(0) | classic fiction", "Orwell: 1984(1)3 | dystopia fiction", "Nobody: |"}, "preloaded")
	// Preload of everything.
	var one JpAuthor
	t.must(db.Preload(clause.Associations).First(&one, "name = ?", "Orwell").Error, "Preload(clause.Associations)")
	eq([]any{one.Publisher.Name, one.Bio.Text, len(one.Books), len(one.Tags)}, []any{"Secker", "b. 1903", 1, 2}, "Preload(clause.Associations)")
	// A hand-written join, and a join with a grouped aggregate.
	var names []string
	t.must(db.Model(&JpAuthor{}).Joins("JOIN jp_books ON jp_books.jp_author_id = jp_authors.id").Where("jp_books.pages > ?", 300).
		Order("jp_authors.name").Distinct().Pluck("jp_authors.name", &names).Error, "Joins(raw)")
	eq(names, []string{"Austen", "Orwell"}, "authors of books over 300 pages")
	var stats []struct {
		Name  string
		Books int
		Pages int
	}
	t.must(db.Model(&JpAuthor{}).Select("jp_authors.name, count(jp_books.id) AS books, coalesce(sum(jp_books.pages), 0) AS pages").
		Joins("LEFT JOIN jp_books ON jp_books.jp_author_id = jp_authors.id").Group("jp_authors.name").Order("books DESC, name").
		Scan(&stats).Error, "LEFT JOIN Group")
	eq(fmt.Sprint(stats), "[{Austen 2 723} {Orwell 1 328} {Nobody 0 0}]", "books per author")
}

func associationMode(t *T) {
	db := jpSetup(t, "as_")
	var austen JpAuthor
	t.must(db.First(&austen, "name = ?", "Austen").Error, "First")
	tags := func() *gorm.Association { return db.Model(&austen).Association("Tags") }
	eq(tags().Count(), int64(2), "Count")
	t.must(tags().Append(&JpTag{Name: "romance"}), "Append")
	eq(tags().Count(), int64(3), "Count after Append")
	var found []JpTag
	t.must(tags().Find(&found, "name LIKE ?", "%c%"), "Find with a condition")
	eq(len(found), 3, "tags with a c") // classic, fiction, romance
	var fiction JpTag
	t.must(db.First(&fiction, "name = ?", "fiction").Error, "First(fiction)")
	t.must(tags().Delete(&fiction), "Delete")
	eq(tags().Count(), int64(2), "Count after Delete")
	eq(t.int(db, "SELECT count(*) FROM as_jp_tags WHERE name = 'fiction'"), int64(1), "Delete unlinks only")
	t.must(tags().Replace(&JpTag{Name: "novel"}), "Replace")
	var now []JpTag
	t.must(db.Model(&austen).Association("Tags").Find(&now), "Find")
	eq(len(now) == 1 && now[0].Name == "novel", true, "Replace leaves one tag")
	t.must(db.Model(&austen).Association("Books").Clear(), "Clear has-many")
	eq(t.int(db, "SELECT count(*) FROM as_jp_books WHERE jp_author_id IS NULL"), int64(2), "Clear sets the key to NULL")
	eq(t.int(db, "SELECT count(*) FROM as_jp_books WHERE jp_author_id = ?", austen.ID), int64(0), "books left to Austen")
	// Select(associations).Delete deletes the has-one, has-many and join rows too.
	t.must(db.Select("Bio", "Tags", "Books").Delete(&austen).Error, "Select(associations).Delete")
	eq([]int64{t.int(db, "SELECT count(*) FROM as_jp_authors"), t.int(db, "SELECT count(*) FROM as_jp_bios"),
		t.int(db, "SELECT count(*) FROM as_jp_author_tags"), t.int(db, "SELECT count(*) FROM as_jp_books")},
		[]int64{2, 1, 2, 3}, "authors, bios, links, books after the delete")
}

type ScOrder struct {
	ID     uint
	Status string `gorm:"size:10"`
	Amount int
	Region string `gorm:"size:5"`
}

func paid(db *gorm.DB) *gorm.DB { return db.Where("status = ?", "paid") }

func amountOver(n int) func(*gorm.DB) *gorm.DB {
	return func(db *gorm.DB) *gorm.DB { return db.Where("amount > ?", n) }
}

func paginate(page, size int) func(*gorm.DB) *gorm.DB {
	return func(db *gorm.DB) *gorm.DB { return db.Order("id").Offset((page - 1) * size).Limit(size) }
}

func scopesCountPluck(t *T) {
	db := t.open()
	t.migrate(db, &ScOrder{})
	var orders []ScOrder
	for i := 1; i <= 12; i++ {
		status := []string{"paid", "open", "paid", "void"}[i%4]
		orders = append(orders, ScOrder{Status: status, Amount: i * 10, Region: []string{"eu", "us", "apac"}[i%3]})
	}
	t.create(db, &orders)
	var n int64
	t.must(db.Model(&ScOrder{}).Scopes(paid).Count(&n).Error, "Count paid")
	eq(n, int64(6), "paid orders")
	t.must(db.Model(&ScOrder{}).Scopes(paid, amountOver(50)).Count(&n).Error, "Count paid over 50")
	eq(n, int64(4), "paid orders over 50")
	var ids []uint
	t.must(db.Model(&ScOrder{}).Scopes(paid, paginate(2, 2)).Pluck("id", &ids).Error, "Pluck page 2")
	eq(ids, []uint{6, 8}, "ids of page 2")
	var page []ScOrder
	t.must(db.Scopes(paginate(3, 5)).Find(&page).Error, "Find page 3")
	eq(len(page) == 2 && page[0].ID == 11 && page[1].ID == 12, true, "page 3 of 5")
	var amounts []int64
	t.must(db.Model(&ScOrder{}).Where("region = ?", "eu").Order("amount DESC").Pluck("amount", &amounts).Error, "Pluck amounts")
	eq(amounts, []int64{120, 90, 60, 30}, "amounts in eu")
	var regions []string
	t.must(db.Model(&ScOrder{}).Distinct().Order("region").Pluck("region", &regions).Error, "Distinct Pluck")
	eq(regions, []string{"apac", "eu", "us"}, "regions")
	var sums []sql.NullInt64
	t.must(db.Model(&ScOrder{}).Select("sum(amount) FILTER (WHERE status = 'void')").Group("region").Order("region").Pluck("s", &sums).Error, "Pluck an expression")
	eq(fmt.Sprint(sums), "[{110 true} {30 true} {70 true}]", "void sums per region")
	t.must(db.Table("sc_orders").Where("amount BETWEEN ? AND ?", 25, 75).Count(&n).Error, "Table.Count")
	eq(n, int64(5), "amounts between 25 and 75")
	// Count with Select of one column and with a Distinct column.
	t.must(db.Model(&ScOrder{}).Distinct("status").Count(&n).Error, "Count distinct status")
	eq(n, int64(3), "distinct statuses")
}

type SrMetric struct {
	ID    uint
	Host  string `gorm:"size:10"`
	Value float64
	At    time.Time
}

func scanRawExec(t *T) {
	db := t.open()
	t.migrate(db, &SrMetric{})
	base := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
	var ms []SrMetric
	for i := 0; i < 9; i++ {
		ms = append(ms, SrMetric{Host: []string{"h1", "h2", "h3"}[i%3], Value: float64(i) + 0.5, At: base.Add(time.Duration(i) * time.Hour)})
	}
	t.create(db, &ms)
	type summary struct {
		Host   string
		Cnt    int
		MaxVal float64
		Last   time.Time
	}
	var s []summary
	t.raw(db, &s, "SELECT host, count(*) AS cnt, max(value) AS max_val, max(at) AS last FROM sr_metrics WHERE host IN ? GROUP BY host ORDER BY host",
		[]string{"h1", "h3"})
	if len(s) != 2 || !s[1].Last.Equal(base.Add(8*time.Hour)) {
		fail("summary: %+v", s)
	}
	eq([]any{s[0].Host, s[0].Cnt, s[0].MaxVal, s[1].Host, s[1].MaxVal}, []any{"h1", 3, 6.5, "h3", 8.5}, "Raw.Scan(structs)")
	var one summary
	t.must(db.Table("sr_metrics").Select("host, count(*) AS cnt, max(value) AS max_val").Where("host = ?", "h2").Group("host").Scan(&one).Error, "Table.Select.Scan")
	eq([]any{one.Host, one.Cnt, one.MaxVal}, []any{"h2", 3, 7.5}, "Table.Select.Scan(struct)")
	var m map[string]any
	t.must(db.Raw("SELECT 1::int2 AS a, 2::int4 AS b, 3::int8 AS c, 1.5::float4 AS d, 'x'::text AS e, true AS f, NULL::text AS g, '2.50'::numeric AS h").
		Scan(&m).Error, "Raw.Scan(map)")
	for k, v := range m {
		m[k] = fmt.Sprintf("%T %v", v, v)
	}
	eq(m, map[string]any{"a": "int16 1", "b": "int32 2", "c": "int64 3", "d": "float32 1.5", "e": "string x", "f": "bool true",
		"g": "<nil> <nil>", "h": "float64 2.5"}, "Raw.Scan(map): Go types and values")
	var host string
	var value float64
	t.must(db.Raw("SELECT host, value FROM sr_metrics WHERE id = @id", map[string]any{"id": 5}).Row().Scan(&host, &value), "Row().Scan")
	eq([]any{host, value}, []any{"h2", 4.5}, "Row().Scan")
	var series []int
	t.raw(db, &series, "SELECT generate_series(?::int, ?::int, ?::int)", 10, 1, -3)
	eq(series, []int{10, 7, 4, 1}, "generate_series")
	n := t.exec(db, "UPDATE sr_metrics SET value = value * ? WHERE host = ? AND at >= ?", 2, "h1", base.Add(time.Hour))
	eq(n, int64(2), "Exec(UPDATE) RowsAffected")
	n = t.exec(db, "DELETE FROM sr_metrics WHERE id IN (?)", db.Table("sr_metrics").Select("id").Where("value < ?", 2))
	eq(n, int64(2), "Exec(DELETE with a subquery) RowsAffected")
	n = t.exec(db, "INSERT INTO sr_metrics (host, value, at) VALUES (@h, @v, now()), (@h, @v * 2.0, now())", sql.Named("h", "h9"), sql.Named("v", 1.25))
	eq(n, int64(2), "Exec(INSERT, named) RowsAffected")
	var total float64
	t.raw(db, &total, "SELECT sum(value) FROM sr_metrics WHERE host = 'h9'")
	eq(total, 3.75, "sum of the inserted values")
	t.exec(db, "CREATE TEMP TABLE sr_tmp AS SELECT host, sum(value) AS v FROM sr_metrics GROUP BY host")
	var temp []struct {
		Host string
		V    float64
	}
	t.raw(db.Order("host"), &temp, "SELECT * FROM sr_tmp ORDER BY host")
	eq(fmt.Sprint(temp), "[{h1 20} {h2 12} {h3 16.5} {h9 3.75}]", "CREATE TEMP TABLE AS, then SELECT *")
}

type RiLine struct {
	ID   uint
	Text string `gorm:"size:20"`
	N    int
}

func rowsIteration(t *T) {
	db := t.open()
	t.migrate(db, &RiLine{})
	var lines []RiLine
	for i := 1; i <= 25; i++ {
		lines = append(lines, RiLine{Text: fmt.Sprintf("line %d", i), N: i})
	}
	t.must(db.CreateInBatches(&lines, 10).Error, "CreateInBatches")
	rows, err := db.Model(&RiLine{}).Where("n % ? = 0", 5).Order("n").Rows()
	t.must(err, "Rows")
	var seen []string
	for rows.Next() {
		var l RiLine
		t.must(db.ScanRows(rows, &l), "ScanRows")
		seen = append(seen, fmt.Sprintf("%d:%s", l.ID, l.Text))
	}
	t.must(rows.Err(), "rows.Err")
	rows.Close()
	eq(seen, []string{"5:line 5", "10:line 10", "15:line 15", "20:line 20", "25:line 25"}, "ScanRows")
	rows, err = db.Table("ri_lines").Select("n, text").Where("n > ?", 22).Order("n DESC").Rows()
	t.must(err, "Rows(select)")
	cols, err := rows.Columns()
	t.must(err, "Columns")
	eq(cols, []string{"n", "text"}, "Columns")
	seen = nil
	for rows.Next() {
		var n int
		var text string
		t.must(rows.Scan(&n, &text), "rows.Scan")
		seen = append(seen, fmt.Sprintf("%d=%s", n, text))
	}
	rows.Close()
	eq(seen, []string{"25=line 25", "24=line 24", "23=line 23"}, "rows.Scan")
	// Rows closed early leave the connection usable.
	rows, err = db.Model(&RiLine{}).Rows()
	t.must(err, "Rows")
	rows.Next()
	rows.Close()
	// FindInBatches: pages by primary key.
	var batch []RiLine
	var sizes []int
	sum := 0
	r := db.Where("n > ?", 3).FindInBatches(&batch, 7, func(tx *gorm.DB, b int) error {
		sizes = append(sizes, len(batch))
		for _, l := range batch {
			sum += l.N
		}
		return nil
	})
	t.must(r.Error, "FindInBatches")
	eq([]any{sizes, sum, r.RowsAffected}, []any{[]int{7, 7, 7, 1}, 325 - 6, int64(22)}, "FindInBatches sizes, sum, rows")
}

type SdNote struct {
	ID        uint
	Text      string         `gorm:"size:20"`
	DeletedAt gorm.DeletedAt `gorm:"index"`
}

func softDelete(t *T) {
	db := t.open()
	t.migrate(db, &SdNote{})
	t.create(db, []SdNote{{Text: "a"}, {Text: "b"}, {Text: "c"}, {Text: "d"}})
	r := db.Delete(&SdNote{}, []uint{2, 3})
	t.must(r.Error, "Delete")
	eq(r.RowsAffected, int64(2), "soft Delete RowsAffected")
	var notes []SdNote
	t.must(db.Order("id").Find(&notes).Error, "Find")
	eq(len(notes) == 2 && notes[0].Text == "a" && notes[1].Text == "d", true, "Find skips deleted rows")
	var n int64
	t.must(db.Model(&SdNote{}).Count(&n).Error, "Count")
	eq(n, int64(2), "Count skips deleted rows")
	err := db.First(&SdNote{}, 2).Error
	if !errors.Is(err, gorm.ErrRecordNotFound) {
		fail("First(deleted): got %v, want ErrRecordNotFound", err)
	}
	var all []SdNote
	t.must(db.Unscoped().Order("id").Find(&all).Error, "Unscoped.Find")
	if len(all) != 4 || !all[1].DeletedAt.Valid || all[0].DeletedAt.Valid || time.Since(all[1].DeletedAt.Time) > time.Minute {
		fail("Unscoped rows: %+v", all)
	}
	t.must(db.Unscoped().Model(&SdNote{}).Where("deleted_at IS NOT NULL").Count(&n).Error, "count deleted")
	eq(n, int64(2), "deleted rows")
	// Deleting again does nothing; restoring; deleting for good.
	r = db.Delete(&SdNote{}, 2)
	eq([]any{r.Error, r.RowsAffected}, []any{nil, int64(0)}, "Delete of a deleted row")
	t.must(db.Unscoped().Model(&SdNote{}).Where("id = ?", 3).Update("deleted_at", nil).Error, "restore")
	r = db.Unscoped().Delete(&SdNote{}, 2)
	t.must(r.Error, "Unscoped.Delete")
	eq(r.RowsAffected, int64(1), "hard Delete RowsAffected")
	var texts []string
	t.must(db.Unscoped().Model(&SdNote{}).Order("id").Pluck("text", &texts).Error, "Pluck")
	eq(texts, []string{"a", "c", "d"}, "rows after the hard delete")
	t.must(db.Model(&SdNote{}).Count(&n).Error, "Count")
	eq(n, int64(3), "live rows after restoring")
}

// Hooks: they run in the transaction GORM opens around each write.
type HkAccount struct {
	ID      uint
	Code    string `gorm:"size:36"`
	Name    string `gorm:"size:20"`
	Balance int
	Audit   string `gorm:"size:100"`
	Loaded  bool   `gorm:"-"`
}

type HkLog struct {
	ID  uint
	Msg string `gorm:"size:50"`
}

func (a *HkAccount) BeforeCreate(tx *gorm.DB) error {
	if a.Name == "bad" {
		return errors.New("bad name")
	}
	if a.Code == "" {
		var code string
		if err := tx.Raw("SELECT md5(?)", a.Name).Scan(&code).Error; err != nil {
			return err
		}
		a.Code = code[:8]
	}
	a.Audit = "created"
	return nil
}

func (a *HkAccount) AfterCreate(tx *gorm.DB) error {
	if err := tx.Create(&HkLog{Msg: "created " + a.Name}).Error; err != nil {
		return err
	}
	if a.Balance < 0 {
		return errors.New("negative balance")
	}
	return nil
}

func (a *HkAccount) BeforeUpdate(tx *gorm.DB) error {
	if tx.Statement.Changed("Balance") {
		tx.Statement.SetColumn("Audit", "balance changed")
	}
	return nil
}

func (a *HkAccount) AfterFind(tx *gorm.DB) error {
	a.Loaded = true
	return nil
}

func hooks(t *T) {
	db := t.open()
	t.migrate(db, &HkAccount{}, &HkLog{})
	a := HkAccount{Name: "ann", Balance: 10}
	t.create(db, &a)
	eq([]any{a.ID, a.Code, a.Audit}, []any{uint(1), "7e0d7f8a", "created"}, "BeforeCreate set the code and audit")
	// An error in BeforeCreate: nothing is sent.
	err := db.Create(&HkAccount{Name: "bad"}).Error
	eq(fmt.Sprint(err), "bad name", "BeforeCreate error")
	// An error in AfterCreate rolls back the row and the log written in the hook.
	err = db.Create(&HkAccount{Name: "neg", Balance: -1}).Error
	eq(fmt.Sprint(err), "negative balance", "AfterCreate error")
	var accounts, logs int64
	t.must(db.Model(&HkAccount{}).Count(&accounts).Error, "Count accounts")
	t.must(db.Model(&HkLog{}).Count(&logs).Error, "Count logs")
	eq([]int64{accounts, logs}, []int64{1, 1}, "accounts and logs after the failed creates")
	var found HkAccount
	t.must(db.First(&found, a.ID).Error, "First")
	eq([]any{found.Loaded, found.Code}, []any{true, "7e0d7f8a"}, "AfterFind ran")
	t.must(db.Model(&found).Updates(map[string]any{"balance": 25}).Error, "Updates(balance)")
	t.must(db.Model(&found).Updates(map[string]any{"name": "anne"}).Error, "Updates(name)")
	var audit string
	t.raw(db, &audit, "SELECT audit FROM hk_accounts WHERE id = ?", a.ID)
	eq(audit, "balance changed", "BeforeUpdate set a column")
	// SkipHooks.
	t.must(db.Session(&gorm.Session{SkipHooks: true}).Create(&HkAccount{Name: "raw", Code: "c"}).Error, "Create with SkipHooks")
	t.raw(db, &audit, "SELECT audit FROM hk_accounts WHERE name = 'raw'")
	t.must(db.Model(&HkLog{}).Count(&logs).Error, "Count logs")
	eq([]any{audit, logs}, []any{"", int64(1)}, "no hooks ran")
}

func init() {
	addCase("query_first_take_last_find", queryFirstTakeLastFind)
	addCase("where_conditions", whereConditions)
	addCase("order_limit_offset_group_having", orderLimitOffsetGroup)
	addCase("joins_and_preload", joinsAndPreload)
	addCase("association_mode", associationMode)
	addCase("scopes_count_pluck", scopesCountPluck)
	addCase("scan_raw_exec", scanRawExec)
	addCase("rows_iteration", rowsIteration)
	addCase("soft_delete", softDelete)
	addCase("hooks", hooks)
}
