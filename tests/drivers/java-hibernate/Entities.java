import java.math.BigDecimal;
import java.time.Instant;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.time.OffsetDateTime;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;

import jakarta.persistence.CascadeType;
import jakarta.persistence.Column;
import jakarta.persistence.DiscriminatorColumn;
import jakarta.persistence.DiscriminatorValue;
import jakarta.persistence.ElementCollection;
import jakarta.persistence.Embeddable;
import jakarta.persistence.Embedded;
import jakarta.persistence.Entity;
import jakarta.persistence.EnumType;
import jakarta.persistence.Enumerated;
import jakarta.persistence.FetchType;
import jakarta.persistence.ForeignKey;
import jakarta.persistence.GeneratedValue;
import jakarta.persistence.GenerationType;
import jakarta.persistence.Id;
import jakarta.persistence.Index;
import jakarta.persistence.Inheritance;
import jakarta.persistence.InheritanceType;
import jakarta.persistence.JoinColumn;
import jakarta.persistence.JoinTable;
import jakarta.persistence.Lob;
import jakarta.persistence.ManyToMany;
import jakarta.persistence.ManyToOne;
import jakarta.persistence.OneToMany;
import jakarta.persistence.OrderBy;
import jakarta.persistence.OrderColumn;
import jakarta.persistence.SequenceGenerator;
import jakarta.persistence.Table;
import jakarta.persistence.UniqueConstraint;
import jakarta.persistence.Version;
import jakarta.persistence.CollectionTable;

import org.hibernate.annotations.JdbcTypeCode;
import org.hibernate.type.SqlTypes;

/**
 * The entities of HibernateSuite. Each maps its own hb_ tables, so the cases that use different
 * entities never touch each other's tables. Entities are public static nested classes with an
 * explicit entity name; fields are public for brevity, and the entities that are lazily loaded
 * through proxies have getters (a proxy only initializes itself on a method call).
 */
public final class Entities {

  private Entities() {}

  public enum Status { NEW, ACTIVE, RETIRED }

  /** One column of each common type. */
  @Entity(name = "Item")
  @Table(name = "hb_item")
  public static class Item {
    @Id
    @GeneratedValue(strategy = GenerationType.SEQUENCE, generator = "hb_item_ids")
    @SequenceGenerator(name = "hb_item_ids", sequenceName = "hb_item_seq", allocationSize = 50)
    public Long id;
    @Column(nullable = false, length = 80)
    public String name;
    public int quantity;
    public long views;
    @Column(precision = 12, scale = 2)
    public BigDecimal price;
    public double ratio;
    public boolean active;
    public LocalDate releasedOn;
    public LocalDateTime createdAt;
    public OffsetDateTime updatedAt;
    public Instant seenAt;
    public UUID token;
    public byte[] payload;
    @Enumerated(EnumType.STRING)
    @Column(length = 16)
    public Status status;
    // @Lob with the type that makes it a text column (a plain @Lob is an oid: see Document).
    @Lob
    @JdbcTypeCode(SqlTypes.LONG32VARCHAR)
    public String notes;
    @JdbcTypeCode(SqlTypes.JSON)
    public Map<String, Object> attrs;
  }

  /** Sequence-generated ids from the default generator (table_SEQ, allocationSize 50). */
  @Entity(name = "Author")
  @Table(name = "hb_author")
  public static class Author {
    @Id
    @GeneratedValue(strategy = GenerationType.SEQUENCE)
    public Long id;
    @Column(nullable = false)
    public String name;
    public String country;
    @OneToMany(mappedBy = "author", cascade = CascadeType.ALL, orphanRemoval = true)
    @OrderBy("title")
    public List<Book> books = new ArrayList<>();

    public Author() {}

    public Author(String name, String country) {
      this.name = name;
      this.country = country;
    }

    public String getName() {
      return name;
    }

    public List<Book> getBooks() {
      return books;
    }

    public Book addBook(String title, String isbn, String price, int year) {
      Book b = new Book();
      b.title = title;
      b.isbn = isbn;
      b.price = new BigDecimal(price);
      b.published = LocalDate.of(year, 1, 1);
      b.author = this;
      books.add(b);
      return b;
    }
  }

  /** IDENTITY ids, a lazy @ManyToOne, a @ManyToMany with a join table, a version column. */
  @Entity(name = "Book")
  @Table(name = "hb_book",
      uniqueConstraints = @UniqueConstraint(name = "uk_hb_book_isbn", columnNames = "isbn"))
  public static class Book {
    @Id
    @GeneratedValue(strategy = GenerationType.IDENTITY)
    public Long id;
    @Column(nullable = false)
    public String title;
    @Column(length = 17)
    public String isbn;
    @Column(precision = 8, scale = 2)
    public BigDecimal price;
    public LocalDate published;
    @ManyToOne(fetch = FetchType.LAZY, optional = false)
    @JoinColumn(name = "author_id", foreignKey = @ForeignKey(name = "fk_hb_book_author"))
    public Author author;
    @ManyToMany
    @JoinTable(name = "hb_book_tag",
        joinColumns = @JoinColumn(name = "book_id",
            foreignKey = @ForeignKey(name = "fk_hb_book_tag_book")),
        inverseJoinColumns = @JoinColumn(name = "tag_id",
            foreignKey = @ForeignKey(name = "fk_hb_book_tag_tag")))
    public Set<Tag> tags = new LinkedHashSet<>();
    @Version
    public int version;

    public Author getAuthor() {
      return author;
    }

    public Set<Tag> getTags() {
      return tags;
    }
  }

  @Entity(name = "Tag")
  @Table(name = "hb_tag")
  public static class Tag {
    @Id
    @GeneratedValue(strategy = GenerationType.SEQUENCE)
    public Long id;
    @Column(nullable = false, unique = true, length = 40)
    public String label;
    @ManyToMany(mappedBy = "tags")
    public Set<Book> books = new LinkedHashSet<>();

    public Tag() {}

    public Tag(String label) {
      this.label = label;
    }

    public String getLabel() {
      return label;
    }
  }

  /** Optimistic and pessimistic locking, unique and check constraints. */
  @Entity(name = "Account")
  @Table(name = "hb_account",
      uniqueConstraints = @UniqueConstraint(name = "uk_hb_account_email", columnNames = "email"))
  public static class Account {
    @Id
    @GeneratedValue(strategy = GenerationType.SEQUENCE, generator = "hb_account_ids")
    @SequenceGenerator(name = "hb_account_ids", sequenceName = "hb_account_seq",
        allocationSize = 50)
    public Long id;
    @Column(nullable = false, length = 120)
    public String email;
    @Column(nullable = false, length = 60)
    public String owner;
    @Column(nullable = false, precision = 12, scale = 2)
    public BigDecimal balance;
    @Version
    public long version;

    public Account() {}

    public Account(String email, String owner, String balance) {
      this.email = email;
      this.owner = owner;
      this.balance = new BigDecimal(balance);
    }
  }

  /** Batched inserts, scrolling and streaming. */
  @Entity(name = "Reading")
  @Table(name = "hb_reading")
  public static class Reading {
    @Id
    @GeneratedValue(strategy = GenerationType.SEQUENCE, generator = "hb_reading_ids")
    @SequenceGenerator(name = "hb_reading_ids", sequenceName = "hb_reading_seq",
        allocationSize = 50)
    public Long id;
    @Column(nullable = false, length = 20)
    public String sensor;
    public double value;
    public LocalDateTime takenAt;

    public Reading() {}

    public Reading(String sensor, double value, LocalDateTime takenAt) {
      this.sensor = sensor;
      this.value = value;
      this.takenAt = takenAt;
    }
  }

  /** hb_evolve as first deployed. */
  @Entity(name = "Evolve")
  @Table(name = "hb_evolve")
  public static class EvolveV1 {
    @Id
    public Long id;
    @Column(nullable = false, length = 50)
    public String name;
  }

  /** hb_evolve one release later: two new columns, and a new table that refers to it. */
  @Entity(name = "Evolve")
  @Table(name = "hb_evolve", indexes = @Index(name = "ix_hb_evolve_nickname",
      columnList = "nickname"))
  public static class EvolveV2 {
    @Id
    public Long id;
    @Column(nullable = false, length = 50)
    public String name;
    @Column(length = 40)
    public String nickname;
    @Column(precision = 10, scale = 3)
    public BigDecimal score;
  }

  @Entity(name = "EvolveNote")
  @Table(name = "hb_evolve_note",
      indexes = @Index(name = "ix_hb_evolve_note_created", columnList = "created"))
  public static class EvolveNote {
    @Id
    @GeneratedValue(strategy = GenerationType.IDENTITY)
    public Long id;
    @ManyToOne(optional = false)
    @JoinColumn(name = "evolve_id", foreignKey = @ForeignKey(name = "fk_hb_evolve_note_evolve"))
    public EvolveV2 evolve;
    public LocalDateTime created;
    @Column(length = 200)
    public String body;
  }

  /** What validate must reject: a column hb_evolve does not have. */
  @Entity(name = "Evolve")
  @Table(name = "hb_evolve")
  public static class EvolveMissingColumn {
    @Id
    public Long id;
    @Column(nullable = false, length = 50)
    public String name;
    public Integer rank;
  }

  /** What validate must reject: score is numeric, not an integer. */
  @Entity(name = "Evolve")
  @Table(name = "hb_evolve")
  public static class EvolveWrongType {
    @Id
    public Long id;
    @Column(nullable = false, length = 50)
    public String name;
    public Integer score;
  }

  /** SINGLE_TABLE inheritance with a discriminator column. */
  @Entity(name = "Payment")
  @Table(name = "hb_payment")
  @Inheritance(strategy = InheritanceType.SINGLE_TABLE)
  @DiscriminatorColumn(name = "kind", length = 10)
  public abstract static class Payment {
    @Id
    @GeneratedValue(strategy = GenerationType.SEQUENCE)
    public Long id;
    @Column(precision = 10, scale = 2, nullable = false)
    public BigDecimal amount;
  }

  @Entity(name = "CardPayment")
  @DiscriminatorValue("CARD")
  public static class CardPayment extends Payment {
    @Column(length = 4)
    public String last4;
  }

  @Entity(name = "BankPayment")
  @DiscriminatorValue("BANK")
  public static class BankPayment extends Payment {
    @Column(length = 34)
    public String iban;
  }

  /** JOINED inheritance: a table per class, joined on the id. */
  @Entity(name = "Vehicle")
  @Table(name = "hb_vehicle")
  @Inheritance(strategy = InheritanceType.JOINED)
  public abstract static class Vehicle {
    @Id
    public Long id;
    @Column(nullable = false, length = 30)
    public String maker;
  }

  @Entity(name = "Car")
  @Table(name = "hb_car")
  public static class Car extends Vehicle {
    public int seats;
  }

  @Entity(name = "Truck")
  @Table(name = "hb_truck")
  public static class Truck extends Vehicle {
    @Column(precision = 6, scale = 1)
    public BigDecimal payloadTons;
  }

  @Embeddable
  public static class Address {
    @Column(length = 60)
    public String street;
    @Column(length = 40)
    public String city;
    @Column(length = 10)
    public String zip;

    public Address() {}

    public Address(String street, String city, String zip) {
      this.street = street;
      this.city = city;
      this.zip = zip;
    }
  }

  /** An @Embedded value and @ElementCollections (ordered list, set). */
  @Entity(name = "Person")
  @Table(name = "hb_person")
  public static class Person {
    @Id
    @GeneratedValue(strategy = GenerationType.IDENTITY)
    public Long id;
    @Column(nullable = false, length = 60)
    public String name;
    @Embedded
    public Address home;
    @ElementCollection
    @CollectionTable(name = "hb_person_phone", joinColumns = @JoinColumn(name = "person_id"))
    @OrderColumn(name = "pos")
    @Column(name = "phone", length = 20)
    public List<String> phones = new ArrayList<>();
    @ElementCollection
    @CollectionTable(name = "hb_person_nick", joinColumns = @JoinColumn(name = "person_id"))
    @Column(name = "nick", length = 20)
    public Set<String> nicks = new LinkedHashSet<>();
  }

  /** Java arrays, which Hibernate maps to PostgreSQL array columns. */
  @Entity(name = "Sheet")
  @Table(name = "hb_sheet")
  public static class Sheet {
    @Id
    public Long id;
    public String[] labels;
    public int[] counts;
    public List<LocalDate> days;
  }

  /** Plain @Lob fields: on PostgreSQL, Hibernate stores them as large objects (oid columns). */
  @Entity(name = "Document")
  @Table(name = "hb_document")
  public static class Document {
    @Id
    public Long id;
    @Column(length = 40)
    public String title;
    @Lob
    public String body;
    @Lob
    public byte[] data;
  }
}
