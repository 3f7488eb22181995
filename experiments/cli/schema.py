"""python -m experiments.cli.schema: write docs/records.schema.json, the records' JSON
schema generated from their models (experiments.records.schema)."""

from experiments import records

if __name__ == "__main__":
    records.write_whole(records.SCHEMA_FILE, records.schema_text().encode())
    print(f"{records.SCHEMA_FILE} written")
