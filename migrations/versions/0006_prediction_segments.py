"""the segment values of each prediction kept for the label join

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01 23:45:00
"""
from alembic import op
import sqlalchemy as sa


revision = '0006'
down_revision = '0005'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('predictions', schema=None) as batch_op:
        batch_op.add_column(sa.Column('segments', sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('predictions', schema=None) as batch_op:
        batch_op.drop_column('segments')
