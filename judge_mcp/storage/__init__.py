"""All state: connections and transactions (SQLite), the migrations, one repository per table."""
