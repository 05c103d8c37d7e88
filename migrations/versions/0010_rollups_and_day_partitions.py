"""rollups: window states and detector results rolled up by hour and day; on PostgreSQL, the detector results
partitioned by day of window start (retention drops a rolled-up day instead of deleting its rows)

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-06 04:00:00
"""
from alembic import op
import sqlalchemy as sa


revision = '0010'
down_revision = '0009'
branch_labels = None
depends_on = None

# Day partitions live in their own schema, so the tables the application knows stay the only ones in its own.
PARTITION_SCHEMA = 'driftline_partitions'
# table -> (its unique constraints (name, columns), its other indexes (name, columns))
PARTITIONED = {
    'detector_results': ([], [('ix_detector_results_window', 'model, version, window_start_ms')]),
}


def upgrade() -> None:
    op.create_table(
        'window_rollups',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('model', sa.String(length=200), nullable=False),
        sa.Column('version', sa.String(length=100), nullable=False),
        sa.Column('grain', sa.String(length=10), nullable=False),
        sa.Column('start_ms', sa.BigInteger(), nullable=False),
        sa.Column('end_ms', sa.BigInteger(), nullable=False),
        sa.Column('windows', sa.Integer(), nullable=False),
        sa.Column('events', sa.BigInteger(), nullable=False),
        sa.Column('late_events', sa.BigInteger(), nullable=False),
        sa.Column('state', sa.LargeBinary(), nullable=False),
        sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_window_rollups')),
        sa.UniqueConstraint('model', 'version', 'grain', 'start_ms', name=op.f('uq_window_rollups_model')),
    )
    op.create_index('ix_window_rollups_start', 'window_rollups', ['start_ms'], unique=False)
    op.create_table(
        'result_rollups',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('model', sa.String(length=200), nullable=False),
        sa.Column('version', sa.String(length=100), nullable=False),
        sa.Column('start_ms', sa.BigInteger(), nullable=False),
        sa.Column('end_ms', sa.BigInteger(), nullable=False),
        sa.Column('detector', sa.String(length=50), nullable=False),
        sa.Column('feature', sa.String(length=200), nullable=False),
        sa.Column('segment', sa.String(length=300), nullable=False),
        sa.Column('metric', sa.String(length=100), nullable=False),
        sa.Column('windows', sa.Integer(), nullable=False),
        sa.Column('value_min', sa.Float(), nullable=True),
        sa.Column('value_max', sa.Float(), nullable=True),
        sa.Column('value_sum', sa.Float(), nullable=True),
        sa.Column('values', sa.Integer(), nullable=False),
        sa.Column('threshold', sa.Float(), nullable=True),
        sa.Column('breached', sa.Integer(), nullable=False),
        sa.Column('breached_above', sa.Integer(), nullable=False),
        sa.Column('breached_below', sa.Integer(), nullable=False),
        sa.Column('clean_above', sa.Integer(), nullable=False),
        sa.Column('clean_below', sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_result_rollups')),
    )
    op.create_index('ix_result_rollups_version', 'result_rollups', ['model', 'version', 'start_ms'], unique=False)
    op.create_index('ix_result_rollups_start', 'result_rollups', ['start_ms'], unique=False)
    if op.get_bind().dialect.name == 'postgresql':
        op.execute(f'CREATE SCHEMA IF NOT EXISTS {PARTITION_SCHEMA}')
        for table, (uniques, indexes) in PARTITIONED.items():
            _partition(table, uniques, indexes)


def _set_aside(table: str, old: str, uniques: list, indexes: list) -> None:
    """Rename `table` and its constraints and indexes out of the way of the table that replaces it."""
    op.execute(f'ALTER TABLE {table} RENAME TO {old}')
    op.execute(f'ALTER TABLE {old} RENAME CONSTRAINT pk_{table} TO pk_{old}')
    for name, _columns in uniques:
        op.execute(f'ALTER TABLE {old} RENAME CONSTRAINT {name} TO {name}_old')
    for name, _columns in indexes:
        op.execute(f'ALTER INDEX {name} RENAME TO {name}_old')


def _replace(table: str, old: str, uniques: list, indexes: list, partitioned: bool) -> None:
    """Make `table` again like `old` (partitioned by range of window_start_ms, or not), move its rows, drop `old`."""
    op.execute(f'CREATE TABLE {table} (LIKE {old} INCLUDING DEFAULTS)'
               + (' PARTITION BY RANGE (window_start_ms)' if partitioned else ''))
    # the key of a partitioned table holds its partition key; `id` alone stays unique through its sequence
    key = 'id, window_start_ms' if partitioned else 'id'
    op.execute(f'ALTER TABLE {table} ADD CONSTRAINT pk_{table} PRIMARY KEY ({key})')
    for name, columns in uniques:
        op.execute(f'ALTER TABLE {table} ADD CONSTRAINT {name} UNIQUE ({columns})')
    for name, columns in indexes:
        op.execute(f'CREATE INDEX {name} ON {table} ({columns})')
    op.execute(f'ALTER SEQUENCE {table}_id_seq OWNED BY {table}.id')
    if partitioned:  # rows of days without a partition land here (driftline.store.partitions makes the days)
        op.execute(f'CREATE TABLE {PARTITION_SCHEMA}.{table}_default PARTITION OF {table} DEFAULT')
    op.execute(f'INSERT INTO {table} SELECT * FROM {old}')
    op.execute(f'DROP TABLE {old}')  # a partitioned one's partitions go with it


def _partition(table: str, uniques: list, indexes: list) -> None:
    _set_aside(table, f'{table}_unpartitioned', uniques, indexes)
    _replace(table, f'{table}_unpartitioned', uniques, indexes, partitioned=True)


def _unpartition(table: str, uniques: list, indexes: list) -> None:
    _set_aside(table, f'{table}_partitioned', uniques, indexes)
    _replace(table, f'{table}_partitioned', uniques, indexes, partitioned=False)


def downgrade() -> None:
    if op.get_bind().dialect.name == 'postgresql':
        for table, (uniques, indexes) in PARTITIONED.items():
            _unpartition(table, uniques, indexes)
        op.execute(f'DROP SCHEMA IF EXISTS {PARTITION_SCHEMA} CASCADE')
    op.drop_index('ix_result_rollups_start', table_name='result_rollups')
    op.drop_index('ix_result_rollups_version', table_name='result_rollups')
    op.drop_table('result_rollups')
    op.drop_index('ix_window_rollups_start', table_name='window_rollups')
    op.drop_table('window_rollups')
