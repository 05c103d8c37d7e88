"""partial index on the labels still waiting for their prediction

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30 14:30:00
"""
from alembic import op
import sqlalchemy as sa


revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('labels', schema=None) as batch_op:
        batch_op.create_index('ix_labels_waiting', ['request_id'], unique=False,
                              sqlite_where=sa.text('joined = 0'), postgresql_where=sa.text('joined = false'))


def downgrade() -> None:
    with op.batch_alter_table('labels', schema=None) as batch_op:
        batch_op.drop_index('ix_labels_waiting', sqlite_where=sa.text('joined = 0'),
                            postgresql_where=sa.text('joined = false'))
