"""predictions and labels keyed by (request_id, model): a request id names a request only within its model

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-02 10:00:00
"""
from alembic import op
import sqlalchemy as sa


revision = '0007'
down_revision = '0006'
branch_labels = None
depends_on = None

TABLES = ('predictions', 'labels')


def upgrade() -> None:
    # Batch mode copies the table on SQLite (its primary key cannot be altered); rows are kept.
    for table in TABLES:
        with op.batch_alter_table(table, schema=None, recreate='auto') as batch_op:
            batch_op.drop_constraint(f'pk_{table}', type_='primary')
            batch_op.create_primary_key(f'pk_{table}', ['request_id', 'model'])


def downgrade() -> None:
    for table in TABLES:
        # One row per request id again: other models' rows sharing a request id cannot be kept.
        op.execute(sa.text(f"DELETE FROM {table} WHERE EXISTS (SELECT 1 FROM {table} AS first "
                           f"WHERE first.request_id = {table}.request_id AND first.model < {table}.model)"))
        with op.batch_alter_table(table, schema=None, recreate='auto') as batch_op:
            batch_op.drop_constraint(f'pk_{table}', type_='primary')
            batch_op.create_primary_key(f'pk_{table}', ['request_id'])
