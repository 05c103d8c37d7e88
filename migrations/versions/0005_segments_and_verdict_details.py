"""segments on detector results and alerts; the comparisons behind each rollout verdict

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01 23:30:00
"""
from alembic import op
import sqlalchemy as sa


revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('detector_results', schema=None) as batch_op:
        batch_op.add_column(sa.Column('segment', sa.String(length=300), server_default='', nullable=False))
    with op.batch_alter_table('alerts', schema=None) as batch_op:
        batch_op.add_column(sa.Column('segment', sa.String(length=300), server_default='', nullable=False))
    with op.batch_alter_table('rollout_verdicts', schema=None) as batch_op:
        batch_op.add_column(sa.Column('details', sa.JSON(), server_default='{}', nullable=False))


def downgrade() -> None:
    with op.batch_alter_table('rollout_verdicts', schema=None) as batch_op:
        batch_op.drop_column('details')
    with op.batch_alter_table('alerts', schema=None) as batch_op:
        batch_op.drop_column('segment')
    with op.batch_alter_table('detector_results', schema=None) as batch_op:
        batch_op.drop_column('segment')
