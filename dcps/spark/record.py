"""``python -m dcps.spark.record``: record plain DDS topics into Parquet (see ``dcps record``)."""

from ._record_cli import main

if __name__ == "__main__":
    main()
